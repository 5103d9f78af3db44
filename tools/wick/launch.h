#pragma once

namespace wick::cli {

// `wick launch -n N CMD [ARGS...]` (tools/wick/launch.cpp); the arguments after "launch".
int cmd_launch(int argc, char** argv);

}  // namespace wick::cli
