#!/usr/bin/env python3
"""Load on any OpenAI-compatible server (wick serve, llama-server, vLLM, ...): N streamed requests,
C at a time, prompts of P tokens and G new tokens each; prints output tokens/s, time to first token
and between tokens (p50, p99), as `wick bench-serve` prints the engine's.

  serve_load.py --url http://127.0.0.1:8080 --requests 64 --concurrency 16 --prompt 128 --gen 64
                [--model NAME] [--api-key KEY] [--ids] [--csv FILE] [--label TEXT]

Prompts are random words (or, with --ids, random token ids: for servers that take them, such as
wick serve over a model without a tokenizer), different for every request so that no prefix cache
helps; P counts words or ids, and the server's usage gives the tokens it saw. Each request asks for
exactly G tokens (ignore_eos for llama.cpp; temperature 0). The standard library only.
"""
import argparse
import http.client
import json
import random
import threading
import time
import urllib.parse

WORDS = ("the of and to in is you that it he was for on are as with his they at be this have from "
         "or one had by word but not what all were we when your can said there use an each which she "
         "do how their if will up other about out many then them these so some her would make like "
         "him into time has look two more write go see number no way could people my than first "
         "water been call who oil its now find long down day did get come made may part").split()


def percentile(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def one(url, args, prompt, out):
    u = urllib.parse.urlparse(url)
    body = {"prompt": prompt, "max_tokens": args.gen, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}, "ignore_eos": True}
    if args.model:
        body["model"] = args.model
    headers = {"Content-Type": "application/json"}
    if args.api_key:
        headers["Authorization"] = "Bearer " + args.api_key
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    start = time.perf_counter()
    c.request("POST", "/v1/completions", body=json.dumps(body), headers=headers)
    r = c.getresponse()
    if r.status != 200:
        out.append({"error": f"{r.status} {r.read()[:300]!r}"})
        return
    times, usage, buf = [], None, b""
    while True:
        chunk = r.read1(65536)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            block, buf = buf.split(b"\n\n", 1)
            if not block.startswith(b"data: ") or block == b"data: [DONE]":
                continue
            j = json.loads(block[6:])
            if j.get("usage"):
                usage = j["usage"]
            # A token's chunk: text, or none yet (no finish); the last chunk only where it has text.
            for ch in j.get("choices", []):
                if ch.get("text") or ch.get("finish_reason") is None:
                    times.append(time.perf_counter())
    c.close()
    end = time.perf_counter()
    out.append({"start": start, "end": end, "times": times, "usage": usage})


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--gen", type=int, default=64)
    ap.add_argument("--model", default="")
    ap.add_argument("--api-key", default="")
    ap.add_argument("--ids", action="store_true", help="prompts of random token ids (below 1000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--csv", default="")
    ap.add_argument("--label", default="")
    ap.add_argument("--wait", type=float, default=900, help="seconds to wait for /health to answer 200")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    prompts = [[rng.randrange(10, 1000) for _ in range(args.prompt)] if args.ids else
               " ".join(rng.choice(WORDS) for _ in range(args.prompt)) for _ in range(args.requests)]
    results, lock, next_i = [], threading.Lock(), [0]

    def worker():
        while True:
            with lock:
                i = next_i[0]
                next_i[0] += 1
            if i >= len(prompts):
                return
            one(args.url, args, prompts[i], results)

    # Both wick serve and llama-server answer /health with 200 once the model is loaded.
    u = urllib.parse.urlparse(args.url)
    deadline = time.time() + args.wait
    while True:
        try:
            c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                break
        except OSError:
            pass
        if time.time() > deadline:
            raise SystemExit(f"serve_load: {args.url}/health did not answer 200 within {args.wait} s")
        time.sleep(0.5)
    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(args.concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    errors = [r["error"] for r in results if "error" in r]
    ok = [r for r in results if "error" not in r]
    out_tokens = sum((r["usage"] or {}).get("completion_tokens", len(r["times"])) for r in ok)
    in_tokens = sum((r["usage"] or {}).get("prompt_tokens", 0) for r in ok)
    ttft = [(r["times"][0] - r["start"]) * 1e3 for r in ok if r["times"]]
    tbt = [(b - a) * 1e3 for r in ok for a, b in zip(r["times"], r["times"][1:])]
    row = {"label": args.label, "url": args.url, "requests": args.requests, "concurrency": args.concurrency,
           "prompt": args.prompt, "gen": args.gen, "errors": len(errors), "seconds": round(wall, 3),
           "output_tps": round(out_tokens / wall, 1), "all_tps": round((in_tokens + out_tokens) / wall, 1),
           "ttft_p50_ms": round(percentile(ttft, 50), 2), "ttft_p99_ms": round(percentile(ttft, 99), 2),
           "tbt_p50_ms": round(percentile(tbt, 50), 2), "tbt_p99_ms": round(percentile(tbt, 99), 2),
           "prompt_tokens": in_tokens, "output_tokens": out_tokens}
    print(f"serve_load: {args.label or args.url}: {args.requests} requests, {args.concurrency} at a time, "
          f"prompt {args.prompt}, gen {args.gen}: {row['output_tps']} output tokens/s ({row['all_tps']} with the "
          f"prompts), TTFT p50/p99 {row['ttft_p50_ms']}/{row['ttft_p99_ms']} ms, TBT p50/p99 "
          f"{row['tbt_p50_ms']}/{row['tbt_p99_ms']} ms, {len(errors)} errors")
    for e in errors[:5]:
        print("serve_load: error:", e)
    if args.csv:
        import csv
        import os
        new = not os.path.exists(args.csv)
        with open(args.csv, "a", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(row))
            if new:
                w.writeheader()
            w.writerow(row)
    if errors:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
