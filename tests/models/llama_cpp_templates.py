"""Real chat templates from llama.cpp's source tree, for scripts/template-check.

  llama_cpp_templates.py SRC OUT

SRC is a checkout of llama.cpp (scripts/template-check takes the one the npm package node-llama-cpp
ships as a git bundle). Two kinds of templates are taken from it, each written as
OUT/NAME/tokenizer_config.json ({"chat_template", "bos_token", "eos_token"}), the layout
check_templates.py reads:
  - models/templates/*.jinja: templates as their models' tokenizer_config.json files carry them;
    BOS and EOS text below, from the same models' files;
  - tests/test-chat-template.cpp: older templates (Mistral 7B v0.2, Gemma 1, Phi-3, Phi-4, ...)
    written there as C++ string literals, with their BOS and EOS text.
A template named here but missing from SRC fails the run: the list is the check's coverage.
"""
import json
import os
import re
import sys

# models/templates/FILE.jinja -> (name, BOS text, EOS text)
JINJA_FILES = {
    "google-gemma-2-2b-it": ("gemma2", "<bos>", "<eos>"),
    "meta-llama-Llama-3.3-70B-Instruct": ("llama3_3", "<|begin_of_text|>", "<|eot_id|>"),
    "microsoft-Phi-3.5-mini-instruct": ("phi3_5", "<s>", "<|endoftext|>"),
    "Qwen-QwQ-32B": ("qwq", "", "<|im_end|>"),
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B": ("deepseek_r1_llama", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B": ("deepseek_r1_qwen", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "HuggingFaceTB-SmolLM3-3B": ("smollm3", "", "<|im_end|>"),
    "ibm-granite-granite-3.3-2B-Instruct": ("granite3_3", "<|end_of_text|>", "<|end_of_text|>"),
}

# tests/test-chat-template.cpp test case name -> (name, BOS text, EOS text); the test case's own
# BOS and EOS text where it gives them
CPP_CASES = {
    "mistralai/Mistral-7B-Instruct-v0.2 (NOTE: Old pre-v1 without a system prompt)": ("mistral_v0_2", "<s>", "</s>"),
    "mistralai/Mistral-7B-Instruct-v0.2 (mistralai 'v1' template with a system prompt)": ("mistral_v1", "<s>", "</s>"),
    "Mistral-Large-Instruct-2407 (mistralai 'v3' template; modified to have system prompt at start)": ("mistral_v3", "<s>", "</s>"),
    "mistralai/Mistral-Large-Instruct-2411 (mistralai 'v7' template)": ("mistral_v7", "<s>", "</s>"),
    "google/gemma-7b-it": ("gemma", "<bos>", "<eos>"),
    "bofenghuang/vigogne-2-70b-chat": ("llama2_vigogne", "<s>", "</s>"),
    "teknium/OpenHermes-2.5-Mistral-7B": ("chatml", "", "<|im_end|>"),
    "Phi-3-mini": ("phi3", "<s>", "<|endoftext|>"),
    "phi-4": ("phi4", "", "<|im_end|>"),
    "Llama-3": ("llama3_cpp", "<|begin_of_text|>", "<|eot_id|>"),
}

STRING = r'(?:u8)?"((?:[^"\\]|\\.)*)"'


def unescape(literal):
    """The text of a C++ string literal's body (the escapes test-chat-template.cpp uses)."""
    escapes = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'"}

    def one(m):
        if m.group(1) not in escapes:
            raise ValueError(f"unexpected escape \\{m.group(1)} in a template literal")
        return escapes[m.group(1)]

    return re.sub(r"\\(.)", one, literal)


def cpp_cases(path):
    """name -> (template, BOS text, EOS text) of every test case (BOS and EOS default to empty)."""
    text = open(path, encoding="utf-8").read()
    field = lambda name: rf"/\* \.{name}= \*/\s*{STRING}"  # noqa: E731
    starts = [m.start() for m in re.finditer(r"/\* \.name= \*/", text)] + [len(text)]
    cases = {}
    for begin, end in zip(starts, starts[1:]):
        entry = text[begin:end]
        name, template = re.match(field("name"), entry), re.search(field("template_str"), entry)
        if not name or not template:
            continue
        tokens = [re.search(field(f), entry) for f in ("bos_token", "eos_token")]
        cases[unescape(name.group(1))] = (unescape(template.group(1)),
                                          *(unescape(t.group(1)) if t else "" for t in tokens))
    return cases


def write(out, name, template, bos, eos):
    os.makedirs(os.path.join(out, name), exist_ok=True)
    with open(os.path.join(out, name, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"chat_template": template, "bos_token": bos, "eos_token": eos}, f, ensure_ascii=False)


def main(src, out):
    for file, (name, bos, eos) in JINJA_FILES.items():
        path = os.path.join(src, "models", "templates", file + ".jinja")
        write(out, name, open(path, encoding="utf-8").read(), bos, eos)
    cases = cpp_cases(os.path.join(src, "tests", "test-chat-template.cpp"))
    missing = [c for c in CPP_CASES if c not in cases]
    if missing:
        sys.exit(f"llama_cpp_templates: not in tests/test-chat-template.cpp: {missing}")
    for case, (name, bos, eos) in CPP_CASES.items():
        template, case_bos, case_eos = cases[case]
        write(out, name, template, case_bos or bos, case_eos or eos)
    print(" ".join(sorted(n for n, _, _ in [*JINJA_FILES.values(), *CPP_CASES.values()])))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
