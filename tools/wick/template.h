// `wick chat-template` (tools/wick/template.cpp).
#pragma once

namespace wick::cli {

// argv: the options after the command name.
int cmd_chat_template(int argc, char** argv);

}  // namespace wick::cli
