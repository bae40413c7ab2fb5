#include "runtime/text/token_model.hpp"

#include "runtime/text/bpe_model.hpp"
#include "runtime/text/unigram_model.hpp"

namespace asyncrl {

std::unique_ptr<const token_model> token_model::from_json(const nlohmann::json& j,
                                                          const hf_where& where) {
  if (!j.is_object()) where.fail("missing object");
  // Files written by older versions may leave out "type"; the fields tell it apart then.
  std::string type = j.contains("type")                             ? where.type_of(j)
                     : j.contains("merges")                         ? "BPE"
                     : j.contains("vocab") && j["vocab"].is_array() ? "Unigram"
                                                                    : "unknown";
  if (type == "BPE") return std::make_unique<bpe_model>(j, where);
  if (type == "Unigram") return std::make_unique<unigram_model>(j, where);
  where.typed(type).fail("model type '" + type + "' is not supported (only BPE and Unigram)");
}

}  // namespace asyncrl
