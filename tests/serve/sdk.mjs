// `wick serve` through the official OpenAI SDK for Node (npm `openai`), as an application calls
// it: chat and completions whole and streamed, the models list, a stream aborted by the client,
// an error response, and a bad key. scripts/serve-check runs it against a server on loopback.
//   node sdk.mjs BASE_URL KEY
import OpenAI from "openai";

const [base, key] = process.argv.slice(2);
const client = new OpenAI({ baseURL: base + "/v1", apiKey: key, maxRetries: 0, timeout: 60000 });
let checks = 0;
async function metricsText() {
  return (await fetch(base + "/metrics", { headers: { Authorization: "Bearer " + key } })).text();
}
function check(ok, what) {
  if (!ok) throw new Error("sdk: failed: " + what);
  checks++;
}

const models = await client.models.list();
const model = models.data[0].id;
check(models.data.length === 1 && model === "tiny.gguf", "models.list names the tiny model");

const messages = [{ role: "system", content: "Be brief." }, { role: "user", content: "What is free software?" }];
const chat = await client.chat.completions.create({ model, messages, max_tokens: 12, temperature: 0 });
const answer = chat.choices[0].message.content;
check(chat.object === "chat.completion" && chat.choices[0].message.role === "assistant", "chat answer's shape");
check(answer.length > 0 && chat.choices[0].finish_reason === "length" && chat.usage.completion_tokens === 12,
      "chat answer: text, finish_reason, usage");

let streamed = "", usage = null, finish = null;
const stream = await client.chat.completions.create({ model, messages, max_tokens: 12, temperature: 0, stream: true,
                                                       stream_options: { include_usage: true } });
for await (const chunk of stream) {
  if (chunk.usage) usage = chunk.usage;
  for (const c of chunk.choices) {
    streamed += c.delta.content || "";
    if (c.finish_reason) finish = c.finish_reason;
  }
}
check(streamed === answer, "the streamed chat answer equals the whole one");
check(finish === "length" && usage && usage.total_tokens === chat.usage.total_tokens, "the stream's finish and usage");

const completion = await client.completions.create({ model, prompt: "The GNU General Public License", max_tokens: 8,
                                                     temperature: 0.7, seed: 3 });
check(completion.object === "text_completion" && completion.choices[0].text.length > 0, "a completion");
let pieces = "";
for await (const chunk of await client.completions.create({ model, prompt: "The GNU General Public License", max_tokens: 8,
                                                             temperature: 0.7, seed: 3, stream: true }))
  pieces += chunk.choices[0]?.text || "";
check(pieces === completion.choices[0].text, "the streamed completion equals the whole one (same seed)");

// A stream the client stops after two chunks ends (the SDK ends the iteration quietly); the server
// cancels the rest (checked below: fewer tokens made than asked).
const before = Number(/^wick_generated_tokens_total (\d+)$/m.exec(await metricsText())[1]);
const controller = new AbortController();
let seen = 0;
try {
  const long = await client.completions.create({ model, prompt: "The", max_tokens: 2000, stream: true },
                                               { signal: controller.signal });
  for await (const chunk of long) {
    if (++seen === 2) controller.abort();
  }
} catch (e) {
  check(e instanceof OpenAI.APIUserAbortError || e.name === "AbortError", "an aborted stream: " + e);
}
check(seen >= 2 && seen < 100, "an aborted stream ends early");

// Errors come back as the SDK's typed errors with OpenAI's fields.
try {
  await client.chat.completions.create({ model, messages: [{ role: "wizard", content: "x" }] });
  check(false, "an unknown role is refused");
} catch (e) {
  check(e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === "messages[0].role", "400 with its param");
}
try {
  await client.completions.create({ model: "gpt-4", prompt: "x" });
  check(false, "another model's name is refused");
} catch (e) {
  check(e instanceof OpenAI.NotFoundError && e.code === "model_not_found", "404 model_not_found");
}
try {
  await new OpenAI({ baseURL: base + "/v1", apiKey: "wrong", maxRetries: 0 }).models.list();
  check(false, "a bad key is refused");
} catch (e) {
  check(e instanceof OpenAI.AuthenticationError && e.status === 401, "401 for a bad key");
}

// After the abort, the server holds nothing, and it made fewer tokens than the aborted request asked.
let metrics = "";
for (let i = 0; i < 100; i++) {
  metrics = await metricsText();
  if (/^wick_requests_running 0$/m.test(metrics) && /^wick_kv_blocks_used 0$/m.test(metrics)) break;
  await new Promise((r) => setTimeout(r, 100));
}
check(/^wick_requests_running 0$/m.test(metrics) && /^wick_kv_blocks_used 0$/m.test(metrics),
      "nothing running and no block held after the abort");
const made = Number(/^wick_generated_tokens_total (\d+)$/m.exec(metrics)[1]) - before;
check(made < 2000, `the aborted request was cancelled (${made} tokens made of 2000 asked, with the checks after it)`);
console.log(`sdk: ${checks} checks passed`);
