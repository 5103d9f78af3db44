// The `wick` program run as a user runs it: its output, exit status, `--json` and `--csv` files.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <vector>

#include "wick/wick.h"

namespace wick {
namespace {

struct WickRun {
  int status = -1;  // the exit status; -1 when killed by a signal
  std::string out, err;
};

std::string temp_path(const std::string& name) {
  static int counter = 0;
  return (std::filesystem::temp_directory_path() /
          ("wick_test_cli_" + std::to_string(getpid()) + "_" + std::to_string(counter++) + "_" + name))
      .string();
}

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Runs `wick ARGS` through the shell (ARGS is shell syntax: quote regexes).
WickRun run_wick(const std::string& args) {
  const std::string err_path = temp_path("stderr");
  const std::string cmd = std::string("'") + WICK_CLI + "' " + args + " 2>'" + err_path + "'";
  WickRun r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) {
    ADD_FAILURE() << "cannot run " << cmd;
    return r;
  }
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
  const int status = pclose(p);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = read_file(err_path);
  std::filesystem::remove(err_path);
  return r;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream is(text);
  for (std::string line; std::getline(is, line);)
    if (!line.empty()) out.push_back(line);
  return out;
}

std::vector<std::string> words_of(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream is(line);
  for (std::string w; is >> w;) out.push_back(w);
  return out;
}

// A value of the flat records `wick parity --json` writes.
struct JsonValue {
  enum Kind { String, Number, Null } kind = Null;
  std::string text;
  double number = 0;
};
using JsonRecord = std::map<std::string, JsonValue>;

// Reads an array of flat objects (string, number and null values); false on a syntax error.
class JsonReader {
 public:
  explicit JsonReader(const std::string& s) : s_(s) {}
  bool records(std::vector<JsonRecord>* out) {
    if (!eat('[')) return false;
    if (eat(']')) return at_end();
    do {
      JsonRecord r;
      if (!object(&r)) return false;
      out->push_back(std::move(r));
    } while (eat(','));
    return eat(']') && at_end();
  }

 private:
  void skip_space() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool eat(char c) {
    skip_space();
    if (i_ >= s_.size() || s_[i_] != c) return false;
    ++i_;
    return true;
  }
  bool at_end() {
    skip_space();
    return i_ == s_.size();
  }
  bool string(std::string* out) {
    if (!eat('"')) return false;
    for (; i_ < s_.size() && s_[i_] != '"'; ++i_) {
      if (s_[i_] == '\\' && ++i_ == s_.size()) return false;  // wick escapes only '"' and '\'
      *out += s_[i_];
    }
    return i_++ < s_.size();
  }
  bool value(JsonValue* v) {
    skip_space();
    if (i_ < s_.size() && s_[i_] == '"') {
      v->kind = JsonValue::String;
      return string(&v->text);
    }
    if (s_.compare(i_, 4, "null") == 0) {
      i_ += 4;
      v->kind = JsonValue::Null;
      return true;
    }
    const char* begin = s_.c_str() + i_;
    char* end = nullptr;
    v->number = std::strtod(begin, &end);
    if (end == begin) return false;
    v->kind = JsonValue::Number;
    i_ += static_cast<size_t>(end - begin);
    return true;
  }
  bool object(JsonRecord* r) {
    if (!eat('{')) return false;
    if (eat('}')) return true;
    do {
      std::string key;
      JsonValue v;
      if (!string(&key) || !eat(':') || !value(&v)) return false;
      (*r)[key] = v;
    } while (eat(','));
    return eat('}');
  }

  const std::string& s_;
  size_t i_ = 0;
};

const char* kExpArgs = "parity --backend cpu --op '^unary\\.exp$' --dtype f32,bf16 --seed 7";

TEST(Cli, InfoPrintsTheVersionAndBackends) {
  WickRun r = run_wick("info");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find(std::string("wick ") + version() + "\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("backends built in: cpu"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("devices:"), std::string::npos) << r.out;
}

TEST(Cli, ParityRunsOnlyTheSelectedOpAndDtypes) {
  WickRun r = run_wick(kExpArgs);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  std::vector<std::string> lines = lines_of(r.out);
  ASSERT_GE(lines.size(), 4u) << r.out;

  std::smatch m;
  ASSERT_TRUE(std::regex_match(lines[0], m, std::regex(R"(backend cpu: (\d+) cases, seed 7)"))) << lines[0];
  const int cases = std::stoi(m[1]);
  EXPECT_GT(cases, 0);
  ASSERT_TRUE(std::regex_match(lines.back(), m, std::regex(R"((\d+) passed, 0 failed, 0 unsupported)")))
      << lines.back();
  EXPECT_EQ(std::stoi(m[1]), cases);

  // The matrix: a header of the dtypes selected, f32 and bf16 (the others' columns left out, not
  // shown as "not defined"), then one row, unary.exp, with counts under both.
  std::vector<std::string> header = words_of(lines[1]);
  ASSERT_EQ(header, (std::vector<std::string>{"op", "bf16", "f32"})) << lines[1];
  int rows = 0, counted = 0;
  for (size_t i = 2; i + 2 < lines.size(); ++i) {
    std::vector<std::string> row = words_of(lines[i]);
    ASSERT_EQ(row.size(), header.size()) << lines[i];
    EXPECT_EQ(row[0], "unary.exp");
    ++rows;
    for (size_t c = 1; c < row.size(); ++c) {
      if (header[c] == "f32" || header[c] == "bf16") {
        EXPECT_TRUE(std::regex_match(row[c], std::regex(R"(\d+)"))) << header[c] << ": " << row[c];
        counted += std::atoi(row[c].c_str());
      } else {
        EXPECT_EQ(row[c], ".") << header[c];
      }
    }
  }
  EXPECT_EQ(rows, 1) << r.out;
  EXPECT_EQ(counted, cases);
  EXPECT_EQ(r.out.find("\nFAIL "), std::string::npos) << r.out;  // no failure lines
}

TEST(Cli, ParityJsonHasOneRecordPerCase) {
  const std::string path = temp_path("parity.json");
  WickRun r = run_wick(std::string(kExpArgs) + " --json '" + path + "'");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  std::smatch m;
  const std::string last = lines_of(r.out).back();
  ASSERT_TRUE(std::regex_match(last, m, std::regex(R"((\d+) passed, 0 failed, 0 unsupported)"))) << last;

  const std::string text = read_file(path);
  std::filesystem::remove(path);
  std::vector<JsonRecord> records;
  ASSERT_TRUE(JsonReader(text).records(&records)) << text;
  EXPECT_EQ(records.size(), static_cast<size_t>(std::stoi(m[1])));
  std::set<std::string> dtypes, names;
  for (const JsonRecord& rec : records) {
    for (const char* key : {"op", "dtype", "shape", "layout", "backend", "status"}) {
      ASSERT_TRUE(rec.count(key)) << "no " << key;
      EXPECT_EQ(rec.at(key).kind, JsonValue::String) << key;
      EXPECT_FALSE(rec.at(key).text.empty()) << key;
    }
    for (const char* key : {"nmse", "max_abs"}) {
      ASSERT_TRUE(rec.count(key)) << "no " << key;
      EXPECT_EQ(rec.at(key).kind, JsonValue::Number) << key;
      EXPECT_GE(rec.at(key).number, 0) << key;
    }
    EXPECT_EQ(rec.at("op").text, "unary.exp");
    EXPECT_EQ(rec.at("backend").text, "cpu");
    EXPECT_EQ(rec.at("status").text, "pass");
    dtypes.insert(rec.at("dtype").text);
    names.insert(rec.at("dtype").text + "/" + rec.at("layout").text + "/" + rec.at("shape").text);
  }
  EXPECT_EQ(dtypes, (std::set<std::string>{"bf16", "f32"}));
  EXPECT_EQ(names.size(), records.size());  // no case twice
}

// Splits one CSV line (RFC 4180 quoting, as `wick bench --csv` writes it).
std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char ch = line[i];
    if (quoted && ch == '"' && i + 1 < line.size() && line[i + 1] == '"') {
      out.back() += '"';
      ++i;
    } else if (ch == '"') {
      quoted = !quoted;
    } else if (ch == ',' && !quoted) {
      out.emplace_back();
    } else {
      out.back() += ch;
    }
  }
  return out;
}

const std::vector<std::string> kBenchColumns = {"device", "driver", "revision",  "backend", "op",      "dtype",
                                                "shape",  "layout", "median_ms", "min_ms",  "max_ms",  "reps",
                                                "bytes",  "flops",  "rate",      "unit",    "ceiling", "fraction"};

TEST(Cli, BenchPrintsATableAndWritesEveryColumnOfTheCsv) {
  const std::string path = temp_path("bench.csv");
  WickRun r = run_wick("bench --backend cpu --op '^(binary\\.add|conv2d)$' --reps 2 --quick --csv '" + path + "'");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("wick bench on cpu: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("median_ms"), std::string::npos) << r.out;
  EXPECT_TRUE(
      std::regex_search(r.out, std::regex(R"(\nbinary\.add +f32 +256x256 +contiguous +[0-9.]+ +[0-9.]+ +[0-9.]+ +2 )")))
      << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(\nceilings: +copy [0-9.e+-]+ GB/s +gemm f32 )"))) << r.out;

  WickRun info = run_wick("info");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(info.out, m, std::regex(R"(\nrevision (\S+)\n)"))) << info.out;
  const std::string revision = m[1];

  std::vector<std::string> lines = lines_of(read_file(path));
  std::filesystem::remove(path);
  ASSERT_GE(lines.size(), 2u);
  EXPECT_EQ(csv_fields(lines[0]), kBenchColumns);
  std::map<std::string, int> ops;
  std::set<std::string> units;
  for (size_t i = 1; i < lines.size(); ++i) {
    SCOPED_TRACE(lines[i]);
    std::vector<std::string> f = csv_fields(lines[i]);
    ASSERT_EQ(f.size(), kBenchColumns.size());
    std::map<std::string, std::string> row;
    for (size_t c = 0; c < f.size(); ++c) {
      EXPECT_FALSE(f[c].empty()) << kBenchColumns[c];
      row[kBenchColumns[c]] = f[c];
    }
    EXPECT_EQ(row["revision"], revision);
    EXPECT_EQ(row["backend"], "cpu");
    EXPECT_EQ(row["reps"], "2");
    for (const char* key : {"median_ms", "min_ms", "max_ms", "rate", "ceiling", "fraction"})
      EXPECT_GT(std::stod(row[key]), 0) << key;
    EXPECT_LE(std::stod(row["min_ms"]), std::stod(row["median_ms"]));
    EXPECT_LE(std::stod(row["median_ms"]), std::stod(row["max_ms"]));
    const bool flops = row["unit"] == "TFLOP/s";
    EXPECT_TRUE(flops || row["unit"] == "GB/s") << row["unit"];
    EXPECT_GT(std::stod(row[flops ? "flops" : "bytes"]), 0);
    ++ops[row["op"]];
    units.insert(row["unit"]);
  }
  // binary.add f32 and bf16 contiguous, and f32 over a permuted and a broadcast operand; conv2d
  // f32; the ceilings they need: the two copies and the f32 GEMM.
  EXPECT_EQ(ops, (std::map<std::string, int>{
                     {"binary.add", 3}, {"conv2d", 1}, {"copy2d", 1}, {"copy_strided", 1}, {"matmul", 1}}));
  EXPECT_EQ(units, (std::set<std::string>{"GB/s", "TFLOP/s"}));
}

// `wick generate` with no --model runs the shipped tiny model (bigrams of the GPL-3), on every
// device present: greedy, the prompt "GNU General Public" goes on with " License" (the first new
// token keeps its space), and the speed line follows.
// bench-dist prints a row per size from 8 bytes to --max, with the ranks as threads of one process
// (--devices) or as the processes of `wick launch` (--launched; rank 0 prints); one of the two.
TEST(Cli, BenchDistOverThreadsAndProcesses) {
  auto sizes = [](const std::string& out) {
    std::vector<std::string> got;
    for (const std::string& line : lines_of(out)) {
      const std::vector<std::string> w = words_of(line);
      if (w.size() == 4 && std::isdigit(static_cast<unsigned char>(w[0][0]))) got.push_back(w[0]);
    }
    return got;
  };
  const std::vector<std::string> want = {"8", "64", "512"};
  WickRun r = run_wick("bench-dist --devices cpu,cpu --max 512 --iters 2 --dtype f32");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("over 2 ranks (cpu+cpu)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("through shared memory"), std::string::npos) << r.out;
  EXPECT_EQ(sizes(r.out), want) << r.out;
  // --launched takes the GPU of each local rank where there are GPUs, else the CPU.
  int gpus = 0;
  for (const Device& d : available_devices()) gpus += d.is_gpu();
  if (gpus == 0 || gpus >= 2) {
    r = run_wick(std::string("launch -n 2 '") + WICK_CLI + "' bench-dist --launched --max 512 --iters 2 --in-place");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("all_reduce in place sum of bf16 over 2 ranks (2 processes)"), std::string::npos) << r.out;
    EXPECT_EQ(sizes(r.out), want) << r.out;
  }
  r = run_wick("bench-dist --max 512");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("either --devices"), std::string::npos) << r.err;
}

// --quick runs small cases (in cache) but measures the ceilings at full size, out of cache: a case
// faster than its ceiling says "cache", never a fraction above 1.
TEST(Cli, QuickBenchNeverPrintsAFractionAboveOne) {
  WickRun r = run_wick("bench --backend cpu --quick --reps 3 --op 'reduce.sum|unary.exp|binary.add' --dtype f32");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  int rows = 0;
  int64_t copy_elements = 0;
  for (const std::string& line : lines_of(r.out)) {
    std::vector<std::string> w = words_of(line);
    if (w.size() < 3 || (w[1] != "f32")) continue;
    ++rows;
    if (w[0] == "copy2d") {  // "8192x8192": the product of the dims
      copy_elements = 1;
      for (size_t at = 0, x = 0; at <= w[2].size(); at = x + 1) {
        x = std::min(w[2].find('x', at), w[2].size());
        copy_elements *= std::stoll(w[2].substr(at, x - at));
      }
    }
    const std::string& f = w.back();
    if (f == "-" || f == "cache") continue;
    EXPECT_LE(std::stod(f), 1.0) << line;
  }
  EXPECT_GE(rows, 3) << r.out;
  // The copy ceiling is the full-size one (4096x4096 on the CPU, 8192x8192 with 8 threads or
  // more), not a quick, in-cache copy.
  EXPECT_GE(copy_elements, int64_t{4096} * 4096) << r.out;
}

TEST(Cli, GenerateRunsTheTinyModelByDefault) {
  for (const Device& d : available_devices()) {
    SCOPED_TRACE(d.to_string());
    const WickRun r = run_wick("generate --prompt 'GNU General Public' --max-tokens 8 --temp 0 --device " + d.to_string());
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out.rfind("GNU General Public License", 0), 0u) << r.out;
    EXPECT_NE(r.err.find("wick's tiny model"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("generation: 8 tokens"), std::string::npos) << r.err;
  }
}

// `wick tokenize` with several texts reads the tokenizer once and prints each text's ids on a line
// of their own, in the order given: the lines a run of each text alone prints.
TEST(Cli, TokenizePrintsALineForEachText) {
  const std::string model = std::string("'") + WICK_SOURCE_DIR + "/models/tiny.gguf'";
  const std::vector<std::string> texts = {"GNU General Public License", "", "free software, and you"};
  std::string args = "tokenize --model " + model, want;
  std::vector<std::string> paths;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string path = paths.emplace_back(temp_path("text"));
    std::ofstream(path) << texts[i];
    const WickRun one = run_wick("tokenize --model " + model + " --file '" + path + "'");
    ASSERT_EQ(one.status, 0) << one.err;
    ASSERT_EQ(one.out.rfind('[', 0), 0u) << one.out;
    want += one.out;
    args += i == 1 ? " --text ''" : " --file '" + path + "'";  // the empty one as --text
  }
  const WickRun all = run_wick(args);
  for (const std::string& path : paths) std::filesystem::remove(path);
  ASSERT_EQ(all.status, 0) << all.err;
  EXPECT_EQ(all.out, want);
  const WickRun none = run_wick("tokenize --model " + model);
  EXPECT_NE(none.status, 0);
  EXPECT_NE(none.err.find("at least one --text or --file"), std::string::npos) << none.err;
}

// Every command prints its own usage for --help and exits 0.
TEST(Cli, EveryCommandHasItsHelp) {
  for (const char* cmd : {"parity", "bench", "tokenize", "perplexity", "generate", "bench-model", "bench-serve", "launch",
                          "bench-dist"}) {
    SCOPED_TRACE(cmd);
    const WickRun r = run_wick(std::string(cmd) + " --help");
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out.rfind(std::string("usage: wick ") + cmd + " [options]", 0), 0u) << r.out;
    EXPECT_NE(r.out.find("\n  " + std::string(cmd) + " "), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("\n  info "), std::string::npos) << "another command's lines: " << r.out;
  }
}

// The engine under load on the tiny model: a table row with the run's figures and a CSV row.
TEST(Cli, BenchServeRunsTheEngineOnTheTinyModel) {
  const std::string csv = temp_path("serve.csv");
  const WickRun r = run_wick("bench-serve --requests 6 --concurrency 3 --prompt 40 --gen 8 --prefix-share 0.5 "
                             "--step-tokens 32 --csv '" + csv + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("| output t/s |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| 6 | 3 | 40 | 8 | 0.50 |"), std::string::npos) << r.out;
  const std::string row = read_file(csv);
  std::filesystem::remove(csv);
  EXPECT_EQ(std::count(row.begin(), row.end(), ','), 17) << row;
  // Prompts sharing 20 tokens: the whole block of 16 among them is found at least by the last three
  // requests, submitted after others finished.
  const size_t at = r.out.find(" prompt tokens found in the prefix cache");
  ASSERT_NE(at, std::string::npos) << r.out;
  const size_t from = r.out.rfind(' ', at - 1) + 1;
  EXPECT_GE(std::stoll(r.out.substr(from, at - from)), 48) << r.out;
  const WickRun bad = run_wick("bench-serve --prompt 4000 --gen 8");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("pass the model's context of 2048"), std::string::npos) << bad.err;
}

// bench-model on the tiny model by default; --gen 0 or --prompt 0 leaves that test out.
TEST(Cli, BenchModelRunsEitherTestAlone) {
  const WickRun both = run_wick("bench-model --prompt 16 --gen 4 --reps 1 --device cpu");
  ASSERT_EQ(both.status, 0) << both.err;
  EXPECT_NE(both.out.find("| pp16 |"), std::string::npos) << both.out;
  EXPECT_NE(both.out.find("| tg4 |"), std::string::npos) << both.out;
  const WickRun pp = run_wick("bench-model --prompt 16 --gen 0 --reps 1 --device cpu");
  ASSERT_EQ(pp.status, 0) << pp.err;
  EXPECT_NE(pp.out.find("| pp16 |"), std::string::npos) << pp.out;
  EXPECT_EQ(pp.out.find("| tg"), std::string::npos) << pp.out;
  const WickRun tg = run_wick("bench-model --prompt 0 --gen 4 --reps 1 --device cpu");
  ASSERT_EQ(tg.status, 0) << tg.err;
  EXPECT_EQ(tg.out.find("| pp"), std::string::npos) << tg.out;
  EXPECT_NE(tg.out.find("| tg4 |"), std::string::npos) << tg.out;
  const WickRun none = run_wick("bench-model --prompt 0 --gen 0 --device cpu");
  EXPECT_NE(none.status, 0);
  EXPECT_NE(none.err.find("not both 0"), std::string::npos) << none.err;
  const WickRun two = run_wick("bench-model --model x.gguf --shape llama3-1b");
  EXPECT_NE(two.status, 0);
  EXPECT_NE(two.err.find("exclude each other"), std::string::npos) << two.err;
}

// More tokens than the model's context holds (the tiny model's 2048 positions): generation stops
// there and says so.
TEST(Cli, GenerateStopsAtTheContext) {
  const WickRun r = run_wick("generate --prompt 'GNU General Public' --max-tokens 3000 --temp 0 --device cpu");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("generation: 2044 tokens"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("generation stopped at the model's context of 2048 positions"), std::string::npos) << r.err;
  const WickRun short_run = run_wick("generate --prompt 'GNU General Public' --max-tokens 8 --temp 0 --device cpu");
  EXPECT_EQ(short_run.err.find("stopped at the model's context"), std::string::npos) << short_run.err;
}

// Bad sampling options and token counts are named before the model is opened (the file here does
// not exist) and before anything is printed.
TEST(Cli, GenerateRefusesBadOptionsBeforeLoading) {
  const std::string args = "generate --model '" + temp_path("no_such_model") + ".gguf' --prompt hi ";
  const std::pair<std::string, std::string> bad[] = {
      {"--top-p 2", "top_p must be in (0, 1], got 2"},
      {"--temp nan", "temperature must be finite"},
      {"--top-k -3", "top_k must be at least 0"},
      {"--repeat-penalty 0", "repetition_penalty must be finite and positive"},
      {"--max-tokens -1", "--max-tokens -1 is negative"}};
  for (const auto& [option, message] : bad) {
    SCOPED_TRACE(option);
    const WickRun r = run_wick(args + option);
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
  }
  EXPECT_NE(run_wick(args).err.find("no_such_model"), std::string::npos);  // good options: the file is named
}

// `--devices` splits the model over ranks (tensor parallel): two CPU ranks, or every GPU present,
// give the greedy text of one device; a split that does not divide is named.
TEST(Cli, GenerateSplitOverDevicesGivesTheSameText) {
  const std::string args = "generate --prompt 'GNU General Public' --max-tokens 8 --temp 0 ";
  const WickRun one = run_wick(args + "--device cpu");
  ASSERT_EQ(one.status, 0) << one.err;
  std::vector<std::string> lists = {"cpu,cpu"};
  std::string gpus;
  for (const Device& d : available_devices())
    if (!d.is_cpu()) gpus.append(gpus.empty() ? "" : ",").append(d.to_string());
  if (gpus.find(',') != std::string::npos) lists.push_back(gpus);
  for (const std::string& list : lists) {
    const WickRun r = run_wick(args + "--devices " + list);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, one.out) << list;
    // The tiny model's weights are F16: f16 activations on the CPU, as stored (bf16 on GPUs).
    EXPECT_NE(r.err.find("on " + list + (list.starts_with("cpu") ? ", f16" : ", bf16")), std::string::npos) << r.err;
  }
  const WickRun three = run_wick(args + "--devices cpu,cpu,cpu");
  EXPECT_NE(three.status, 0);
  EXPECT_NE(three.err.find("the 4 attention heads do not divide in 3 equal parts"), std::string::npos) << three.err;
  EXPECT_NE(run_wick(args + "--devices cpu,tpu").err.find("unknown device 'tpu' in 'cpu,tpu'"), std::string::npos);
}

// A GPU backend built in on a machine without a GPU (as in CI) is named, with the runtime's reason,
// by info and by parity, instead of a list that shows the CPU alone.
TEST(Cli, ABuiltBackendWithoutADeviceIsNamed) {
  for (DeviceType t : {DeviceType::Cuda, DeviceType::Rocm}) {
    if (!backend_built(t) || device_count(t) > 0) continue;
    const std::string name = t == DeviceType::Cuda ? "cuda" : "rocm";
    const WickRun info = run_wick("info");
    EXPECT_NE(info.out.find(name + ": built in, no device (" + no_device_reason(t) + ")"), std::string::npos) << info.out;
    EXPECT_FALSE(no_device_reason(t).empty());
    const WickRun parity = run_wick("parity --op '^cast$' --dtype u8");
    EXPECT_NE(parity.err.find("parity: " + name + " is built in but has no device"), std::string::npos) << parity.err;
  }
}

TEST(Cli, BadArgumentsExitNonZeroWithAMessage) {
  struct Bad {
    std::string args, message;
  };
  std::vector<Bad> bad = {
      {"", "no command"},
      {"frobnicate", "unknown command 'frobnicate'"},
      {"parity --frobnicate", "unknown option '--frobnicate'"},
      {"parity --dtype f32,f33", "unknown dtype 'f33'"},
      {"parity --dtype f32,", "unknown dtype ''"},
      {"parity --backend tpu", "unknown backend 'tpu'"},
      {"parity --backend cpu --op '^no_such_op$'", "no case matches --op, --dtype and --case"},
      {"parity --backend cpu --case 'no/such/case'", "no case matches --op, --dtype and --case"},
      {"parity --backend cpu --op '('", "--op: bad regular expression '('"},
      {"parity --seed", "missing value after --seed"},
      {"parity --seed abc", "--seed takes an unsigned 64-bit integer, got 'abc'"},
      {"parity --seed 99999999999999999999", "--seed takes an unsigned 64-bit integer"},
      {std::string(kExpArgs) + " --json '" + temp_path("no_such_dir") + "/parity.json'", "cannot write"},
      {"bench --frobnicate", "unknown option '--frobnicate'"},
      {"bench --backend tpu", "unknown backend 'tpu'"},
      {"bench --reps 0", "--reps takes a positive integer, got '0'"},
      {"bench --reps 3x", "--reps takes a positive integer, got '3x'"},
      {"bench --dtype f33", "unknown dtype 'f33'"},
      {"bench --backend cpu --op '('", "--op: bad regular expression '('"},
      {"bench --backend cpu --op '^no_such_op$'", "no case matches --op and --dtype"},
      {"bench --backend cpu --quick --op '^binary\\.add$' --csv '" + temp_path("no_such_dir") + "/b.csv'",
       "cannot write"},
  };
  if (!backend_built(DeviceType::Rocm)) {
    bad.push_back({"parity --backend rocm", "wick was built without ROCm"});
    bad.push_back({"bench --backend rocm", "wick was built without ROCm"});
  }
  for (const Bad& b : bad) {
    SCOPED_TRACE("wick " + b.args);
    WickRun r = run_wick(b.args);
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.status, -1);  // an exit, not a crash
    EXPECT_EQ(r.err.rfind("wick: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(b.message), std::string::npos) << r.err;
    // One line and where the usage is, not the whole usage.
    EXPECT_NE(r.err.find("run 'wick --help'"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("usage: wick"), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace wick
