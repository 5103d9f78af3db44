// `wick serve` (tools/wick/serve.cpp): an OpenAI-compatible HTTP server over the engine.
#pragma once

namespace wick::cli {

// argv: the options after the command name.
int cmd_serve(int argc, char** argv);

}  // namespace wick::cli

namespace wick::serve {

// The chat page served at / (tools/wick/serve_page.cpp): HTML, CSS and JavaScript in one text,
// nothing loaded from elsewhere.
const char* chat_page();

}  // namespace wick::serve
