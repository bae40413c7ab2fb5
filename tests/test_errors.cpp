// asyncrl's error codes (messages/errors.hpp): what a caf::error of the category carries, how a
// registered system renders it, and that it crosses the wire with its code.

#include <gtest/gtest.h>

#include <caf/all.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>

#include <set>
#include <string>
#include <vector>

#include "messages/errors.hpp"
#include "messages/type_ids.hpp"

using namespace asyncrl;

namespace {

constexpr errc kLast = errc::env_failed;

caf::actor_system_config& with_errors(caf::actor_system_config& cfg) {
  register_message_types(cfg);
  register_error_category(cfg);
  return cfg;
}

}  // namespace

// Fails if: two codes share a name (a log would name the wrong failure), a code has no name, or
// a new code was added after `env_failed` without adding it to errc_names (then kLast is stale).
TEST(Errors, EveryCodeHasItsOwnName) {
  std::set<std::string> names;
  for (int c = 1; c <= static_cast<int>(kLast); ++c) {
    const std::string n = to_string(static_cast<errc>(c));
    EXPECT_NE(n, "?") << c;
    EXPECT_TRUE(names.insert(n).second) << n;
  }
  EXPECT_EQ(std::string(to_string(static_cast<errc>(static_cast<int>(kLast) + 1))), "?");
}

// Fails if: the code or category is lost (is() would not tell run_over from bad_request, or
// from CAF's own sec codes with the same number), or the text is dropped.
TEST(Errors, AnErrorCarriesItsCodeAndCategory) {
  auto e = caf::make_error(errc::run_over, "the run is shutting down");
  EXPECT_EQ(e.category(), caf::atom("asyncrl"));
  EXPECT_TRUE(is(e, errc::run_over));
  EXPECT_FALSE(is(e, errc::bad_request));
  // CAF's sec code with the same number is another error.
  auto same_number = caf::make_error(static_cast<caf::sec>(static_cast<uint8_t>(errc::run_over)));
  EXPECT_FALSE(is(same_number, errc::run_over));
  ASSERT_TRUE(e.context().match_elements<std::string>());
  EXPECT_EQ(e.context().get_as<std::string>(0), "the run is shutting down");
}

// Fails if: the renderer is not registered by register_error_category, prints a number instead
// of the code's name, or prints the Reward's counts along with its sentence.
TEST(Errors, ARegisteredSystemRendersTheCodeAndTheSentence) {
  caf::actor_system_config cfg;
  caf::actor_system sys{with_errors(cfg)};
  EXPECT_EQ(sys.render(caf::make_error(errc::unauthorized, "wrong secret")),
            "asyncrl.unauthorized: wrong secret");
  EXPECT_EQ(sys.render(caf::make_error(errc::reward_gave_up, std::string("too many restarts"),
                                       int64_t{7})),
            "asyncrl.reward_gave_up: too many restarts");
  EXPECT_EQ(sys.render(caf::make_error(errc::injected_fault)), "asyncrl.injected_fault");
}

// Fails if: the error does not survive serialization with its code, category and text (a
// worker would see a different failure than the controller sent).
TEST(Errors, AnErrorCrossesTheWireWithItsCode) {
  caf::actor_system_config cfg;
  caf::actor_system sys{with_errors(cfg)};
  auto e = caf::make_error(errc::bad_weights, "node agent: chunks of v3 hold v2");
  std::vector<char> buf;
  {
    caf::binary_serializer sink{sys, buf};
    ASSERT_FALSE(sink(e));
  }
  caf::error back;
  caf::binary_deserializer source{sys, buf};
  ASSERT_FALSE(source(back));
  EXPECT_TRUE(is(back, errc::bad_weights));
  EXPECT_EQ(sys.render(back), "asyncrl.bad_weights: node agent: chunks of v3 hold v2");
}
