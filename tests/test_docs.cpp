// Documentation that cannot rot: the README shows examples/quickstart.cpp verbatim (ctest runs the
// program itself), and docs/numerics.md holds the support table the code defines.
#include <fstream>
#include <sstream>

#include "backend/op.h"
#include "test_util.h"

namespace {

std::string read(const std::string& path) {
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << "cannot read " << path;
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(Readme, ShowsTheExampleVerbatim) {
  std::string readme = read(std::string(WICK_SOURCE_DIR) + "/README.md");
  std::string example = read(std::string(WICK_SOURCE_DIR) + "/examples/quickstart.cpp");
  ASSERT_FALSE(example.empty());
  EXPECT_NE(readme.find("```cpp\n" + example + "```"), std::string::npos)
      << "README.md must contain examples/quickstart.cpp in a ```cpp block, unchanged";
}

TEST(Docs, NumericsHoldsTheSupportTable) {
  std::string doc = read(std::string(WICK_SOURCE_DIR) + "/docs/numerics.md");
  EXPECT_NE(doc.find(wick::support_table_markdown()), std::string::npos)
      << "docs/numerics.md must hold the output of `wick ops`";
}

}  // namespace
