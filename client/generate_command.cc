#include "client/generate_command.h"

#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"

namespace placer::client {
namespace {

// All arguments are integers: the original token-id mode (`placer generate 1 2 3`).
bool LooksLikeTokenIds(const std::vector<std::string>& words) {
  for (const std::string& word : words) {
    int32_t id = 0;
    if (!absl::SimpleAtoi(word, &id)) return false;
  }
  return !words.empty();
}

}  // namespace

CLI::App* AddGenerateCommand(CLI::App& app, GenerateArgs& args) {
  CLI::App* generate = app.add_subcommand(
      "generate",
      "generate from a text prompt (printing text; --stream prints it as it arrives) or from "
      "prompt token ids (printing token ids)");
  generate->add_option("prompt", args.prompt,
                       "the prompt text, or token ids when every argument is an integer")
      ->required();
  generate->add_flag("--text", args.force_text, "treat the arguments as text even if numeric");
  generate->add_flag("--stream", args.stream, "print text as each token arrives");
  args.max_new_tokens_flag = generate->add_option(
      "--max-new-tokens", args.max_new_tokens,
      "tokens to generate (default: the model's generation_config, else 16)");
  args.temperature_flag = generate->add_option("--temperature", args.temperature,
                                               "0 for greedy (default: the model's)");
  args.top_k_flag = generate->add_option("--top-k", args.top_k, "keep the k likeliest tokens; 0: all");
  args.top_p_flag = generate->add_option("--top-p", args.top_p, "nucleus sampling, in (0, 1]");
  args.repetition_penalty_flag = generate->add_option(
      "--repetition-penalty", args.repetition_penalty, "> 0; 1 means none");
  generate->add_option("--stop", args.stop,
                       "end generation at this text, which is not printed (repeatable)")
      ->allow_extra_args(false)  // one string per --stop, so words after it stay the prompt
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  generate->add_option("--seed", args.seed, "make sampling reproducible (0: random)");
  generate->add_flag("--ignore-eos", args.ignore_eos, "keep generating past end-of-sequence");
  return generate;
}

int RunGenerate(PlacerClient& client, const GenerateArgs& args) {
  const bool ids_mode = !args.force_text && LooksLikeTokenIds(args.prompt);
  v1::GenerateRequest request;
  if (ids_mode) {
    for (const std::string& word : args.prompt) {
      int32_t id = 0;
      absl::SimpleAtoi(word, &id);
      request.add_prompt_token_ids(id);
    }
  } else {
    request.set_prompt(absl::StrJoin(args.prompt, " "));
  }
  v1::SamplingParams& params = *request.mutable_params();
  if (args.max_new_tokens_flag->count() > 0) params.set_max_new_tokens(args.max_new_tokens);
  if (args.temperature_flag->count() > 0) {
    params.set_temperature(static_cast<float>(args.temperature));
  }
  if (args.top_k_flag->count() > 0) params.set_top_k(args.top_k);
  if (args.top_p_flag->count() > 0) params.set_top_p(static_cast<float>(args.top_p));
  if (args.repetition_penalty_flag->count() > 0) {
    params.set_repetition_penalty(static_cast<float>(args.repetition_penalty));
  }
  for (const std::string& stop : args.stop) params.add_stop(stop);
  params.set_seed(args.seed);
  params.set_ignore_eos(args.ignore_eos);

  std::string text;
  const absl::Status status = client.Generate(request, [&](const v1::GenerateResponse& response) {
    if (ids_mode) {
      for (int32_t token : response.token_ids()) std::cout << token << " " << std::flush;
    } else if (args.stream) {
      std::cout << response.text() << std::flush;
    } else {
      text += response.text();
    }
    if (!response.finish_reason().empty()) {
      const std::string summary =
          "(" + response.finish_reason() + ": " + std::to_string(response.usage().prompt_tokens()) +
          " prompt, " + std::to_string(response.usage().completion_tokens()) + " generated tokens)";
      if (ids_mode) {
        std::cout << "\n" << summary << std::endl;
      } else {
        // Text mode keeps stdout to the generated text; the summary goes to stderr.
        if (!args.stream) std::cout << text;
        std::cout << std::endl;
        std::cerr << summary << std::endl;
      }
    }
  });
  if (!status.ok()) {
    std::cout << std::flush;
    std::cerr << "placer: " << status.message() << std::endl;
    return 2;
  }
  return 0;
}

}  // namespace placer::client
