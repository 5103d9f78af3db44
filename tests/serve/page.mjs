// The chat page of `wick serve` in a real browser: headless Chromium driven by puppeteer-core. It
// loads the page, gives the key, sends a message, checks that the streamed answer and the speed
// appear, then sends a second one and stops it mid-answer. scripts/serve-check runs it.
//   node page.mjs BASE_URL KEY CHROMIUM SCREENSHOT.png
import puppeteer from "puppeteer-core";

const [base, key, chromium, screenshot] = process.argv.slice(2);
const browser = await puppeteer.launch({
  executablePath: chromium,
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"],
});
let checks = 0;
function check(ok, what) {
  if (!ok) throw new Error("page: failed: " + what);
  checks++;
}
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 900, height: 640 });
  const outside = [];
  page.on("request", (r) => { if (!r.url().startsWith(base)) outside.push(r.url()); });
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.goto(base + "/", { waitUntil: "networkidle0", timeout: 30000 });
  await page.type("#key", key);
  await page.$eval("#key", (el) => el.dispatchEvent(new Event("change")));
  await page.waitForFunction(() => document.querySelector("#model").textContent === "tiny.gguf", { timeout: 10000 });
  check(true, "the page names the model once it has the key");

  const setMax = (n) => page.$eval("#max", (el, v) => { el.value = v; }, String(n));
  await setMax(48);
  await page.type("#input", "What is free software?");
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => /tokens\/s/.test(document.querySelector("#stats").textContent), { timeout: 30000 });
  const answer = await page.$eval(".msg.assistant", (el) => el.textContent);
  const stats = await page.$eval("#stats", (el) => el.textContent);
  check(answer.length > 0, "the streamed answer appears");
  check(/^48 tokens, [\d.]+ tokens\/s/.test(stats), "the speed is shown: " + stats);
  check(await page.$eval(".msg.user", (el) => el.textContent) === "What is free software?", "the question is shown");
  await page.screenshot({ path: screenshot });

  // A long answer, stopped mid-way: the network slowed to 16 KB/s, so that the answer is still
  // arriving however fast the server makes it.
  await page.emulateNetworkConditions({ download: 16 * 1024, upload: 1024 * 1024, latency: 0 });
  await setMax(1800);
  await page.type("#input", "Tell me everything.");
  await page.click("#send");
  await page.waitForFunction(() => document.querySelectorAll(".msg.assistant")[1]?.textContent.length > 0,
                             { timeout: 30000, polling: 10 });
  await page.click("#stop");
  await page.waitForFunction(() => document.querySelector("#stats").textContent !== "" &&
                                   !/characters/.test(document.querySelector("#stats").textContent), { timeout: 10000 });
  check(await page.$eval("#stats", (el) => el.textContent) === "stopped",
        "Stop stops the answer: " + await page.$eval("#stats", (el) => el.textContent) + ": " +
            (await page.$$eval(".msg.assistant", (els) => els[1].textContent)).slice(-200));
  const stopped = await page.$$eval(".msg.assistant", (els) => els[1].textContent.length);
  await new Promise((r) => setTimeout(r, 500));
  check(await page.$$eval(".msg.assistant", (els) => els[1].textContent.length) === stopped, "Stop ends the answer");
  check(await page.$eval("#send", (el) => !el.disabled), "the page takes a new message after Stop");
  check(outside.length === 0, "nothing loaded from elsewhere: " + outside.join(", "));
  check(errors.length === 0, "no script errors: " + errors.join("; "));
} finally {
  await browser.close();
}
console.log(`page: ${checks} checks passed in ${chromium}`);
