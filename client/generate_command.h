// `placer generate`: a text prompt (printed back as text, as it streams with --stream) or
// prompt token ids (printed as ids, the original mode), with the sampling flags.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "client/placer_client.h"

namespace placer::client {

struct GenerateArgs {
  std::vector<std::string> prompt;  // words of the text, or token ids
  bool force_text = false;          // --text: even "1 2 3" is text
  bool stream = false;
  uint32_t max_new_tokens = 0;
  double temperature = 0;
  uint32_t top_k = 0;
  double top_p = 1;
  double repetition_penalty = 1;
  std::vector<std::string> stop;
  uint64_t seed = 0;
  bool ignore_eos = false;
  // Set by AddGenerateCommand: only flags given are sent, the rest come from the model.
  CLI::Option* max_new_tokens_flag = nullptr;
  CLI::Option* temperature_flag = nullptr;
  CLI::Option* top_k_flag = nullptr;
  CLI::Option* top_p_flag = nullptr;
  CLI::Option* repetition_penalty_flag = nullptr;
};

CLI::App* AddGenerateCommand(CLI::App& app, GenerateArgs& args);

// Exit code: 0, or 2 with the error on stderr.
int RunGenerate(PlacerClient& client, const GenerateArgs& args);

}  // namespace placer::client
