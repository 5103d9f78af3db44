// `wick bench-serve` (tools/wick/bench_serve.cpp).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "wick/models/model.h"
#include "wick/quant.h"

namespace wick::cli {

// The model of bench-serve and serve: random weights of a preset shape (`qtype`: in that block
// format) or the file at model_path (wick's tiny model where both are empty), on `devices` (the
// parts of a TensorParallelModel for more than one). `name` gets what it is, `file` (where given)
// the opened file.
std::shared_ptr<const models::Model> engine_model(std::string model_path, const std::string& shape,
                                                  std::optional<quant::QType> qtype, const std::vector<Device>& devices,
                                                  std::optional<DType> dtype, std::string& name,
                                                  std::optional<models::ModelFile>* file = nullptr);

// argv: the options after the command name.
int cmd_bench_serve(int argc, char** argv);

}  // namespace wick::cli
