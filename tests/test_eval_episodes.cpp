// Evaluation of multi-turn episodes (runtime/task/evaluate) runs the episodes training runs
// (runtime/tools/episode_turns): every model turn goes to the environment, its answer is
// appended while turns and tokens are left, and the episode is scored per env.reward. A random
// tiny model writes the turns, so the environment (tests/fixtures/env/faulty_env.py with
// --done-at-turn) decides when an episode ends. Every environment process is reaped when
// evaluate returns (the client's destructor).

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/model/model.hpp"
#include "runtime/task/evaluate.hpp"
#include "runtime/text/char_tokenizer.hpp"
#include "runtime/tools/episode_turns.hpp"
#include "tests/tiny_model.hpp"

#ifndef ASYNCRL_SOURCE_DIR
#error "ASYNCRL_SOURCE_DIR must be defined"
#endif

using namespace asyncrl;

namespace {

const std::string kFaulty = std::string(ASYNCRL_SOURCE_DIR) + "/tests/fixtures/env/faulty_env.py";

std::vector<qa_example> questions(int n) {
  std::vector<qa_example> out;
  for (int i = 0; i < n; ++i) {
    qa_example ex;
    ex.question = "What is " + std::to_string(i) + "+1?";
    ex.ground_truth = std::to_string(i + 1);
    out.push_back(ex);
  }
  return out;
}

eval_options external_episodes(const std::string& flags, env_reward_source reward) {
  eval_options o;
  o.max_new_tokens = 4;
  o.batch = 4;
  o.env.kind = env_kind::external;
  o.env.command = "/usr/bin/python3 " + kFaulty + " " + flags;
  o.env.reward = reward;
  o.max_turns = 5;
  o.max_episode_tokens = 400;
  o.keep_responses = true;
  return o;
}

eval_result run(const eval_options& o, int n = 3) {
  const auto tok = char_tokenizer::builtin();
  auto model = init_causal_lm(test::tiny_model_config(tok.vocab_size()), 0.3, 5, torch::kCPU).ptr();
  return evaluate(model, tok, make_prompt_format(tok, chat_format::none, ""), questions(n), o);
}

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (auto p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1))
    ++n;
  return n;
}

}  // namespace

// Catches an evaluation that is single-turn with an external environment (1 call per question,
// no observation in the text), that appends the final turn's answer, or that ignores the
// environment's reward.
TEST(EvalEpisodes, AnExternalEnvironmentAnswersEveryTurnAndScoresTheEpisode) {
  const auto r = run(external_episodes("--done-at-turn=3", env_reward_source::env));
  EXPECT_EQ(r.env_calls, 9);  // 3 questions x 3 turns
  EXPECT_EQ(r.env_failures, 0);
  EXPECT_DOUBLE_EQ(r.pass1, 0.5);  // the environment's reward on the done step
  ASSERT_EQ(r.responses.size(), 3u);
  for (const auto& x : r.responses) {
    SCOPED_TRACE(x.text);
    EXPECT_EQ(x.turns, 3);
    EXPECT_DOUBLE_EQ(x.reward, 0.5);
    // The answers to turns 1 and 2 are in the context, in order; turn 3's (done) is not.
    const auto t1 = x.text.find(" turn=1 "), t2 = x.text.find(" turn=2 ");
    ASSERT_NE(t1, std::string::npos);
    ASSERT_NE(t2, std::string::npos);
    EXPECT_LT(t1, t2);
    EXPECT_EQ(count(x.text, " turn="), 2u);
    // One process served the episode: it held it since its reset (no replay was needed).
    EXPECT_NE(x.text.find("ep=" + std::to_string(x.question) + " "), std::string::npos);
  }
}

// Catches env.reward read the wrong way: the scorer judges the final model turn (a random
// model never writes "#### N"), sum adds the environment's 0.5.
TEST(EvalEpisodes, TheRewardFollowsEnvReward) {
  EXPECT_DOUBLE_EQ(run(external_episodes("--done-at-turn=2", env_reward_source::scorer)).pass1,
                   0.0);
  EXPECT_DOUBLE_EQ(run(external_episodes("--done-at-turn=2", env_reward_source::sum)).pass1, 0.5);
}

// An episode that reaches max_turns ends there without the environment's done: no reward from
// it, and the last answer is not appended.
TEST(EvalEpisodes, MaxTurnsEndsAnEpisodeTheEnvironmentWouldContinue) {
  auto o = external_episodes("", env_reward_source::env);
  o.max_turns = 2;
  const auto r = run(o);
  EXPECT_EQ(r.env_calls, 6);
  EXPECT_DOUBLE_EQ(r.pass1, 0.0);
  for (const auto& x : r.responses) {
    EXPECT_EQ(x.turns, 2);
    EXPECT_EQ(count(x.text, " turn="), 1u) << x.text;
  }
}

// An environment that never starts fails every call (after its replays); over
// env.max_failure_rate the evaluation throws, naming the environment, instead of reporting a
// silent 0.
TEST(EvalEpisodes, AnEnvironmentThatCannotStartFailsTheEvaluation) {
  try {
    run(external_episodes("--die-at-start", env_reward_source::scorer));
    FAIL() << "evaluate returned";
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("eval: the environment (command '/usr/bin/python3"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("failed 3 of 3 calls"), std::string::npos) << msg;
  }
}

// env.reward, by hand: the scorer's reward, the environment's (0 without one), their sum; an
// episode whose environment failed scores 0 whatever either said.
TEST(EpisodeReward, EachSourceAndAFailedEnvironment) {
  EXPECT_DOUBLE_EQ(episode_reward(env_reward_source::scorer, 1.0, true, 0.25, false), 1.0);
  EXPECT_DOUBLE_EQ(episode_reward(env_reward_source::env, 1.0, true, 0.25, false), 0.25);
  EXPECT_DOUBLE_EQ(episode_reward(env_reward_source::env, 1.0, false, 0.25, false), 0.0);
  EXPECT_DOUBLE_EQ(episode_reward(env_reward_source::sum, 1.0, true, 0.25, false), 1.25);
  EXPECT_DOUBLE_EQ(episode_reward(env_reward_source::sum, 1.0, false, 0.25, false), 1.0);
  for (auto s : {env_reward_source::scorer, env_reward_source::env, env_reward_source::sum})
    EXPECT_DOUBLE_EQ(episode_reward(s, 1.0, true, 0.25, true), 0.0);
}

// The environment's turn as tokens: cut to max_observation_tokens (counted), then to the room
// left, which ends the episode when nothing is left after it.
TEST(ObservationTokens, CutToTheCapThenToTheRoomLeft) {
  const auto tok = char_tokenizer::builtin();
  auto o = observation_tokens(tok, chat_format::none, {"12", "345\n"}, 10, 100);
  EXPECT_EQ(tok.decode(o.ids), "12345\n");  // concatenated as they are, untemplated
  EXPECT_FALSE(o.cut);
  EXPECT_TRUE(o.fits);
  o = observation_tokens(tok, chat_format::none, {"123456"}, 4, 100);
  EXPECT_EQ(tok.decode(o.ids), "1234");
  EXPECT_TRUE(o.cut);
  EXPECT_TRUE(o.fits);
  o = observation_tokens(tok, chat_format::none, {"123456"}, 10, 6);  // exactly the room: no
  EXPECT_EQ(tok.decode(o.ids), "123456");                             // token left for a turn
  EXPECT_FALSE(o.fits);
  o = observation_tokens(tok, chat_format::none, {"123456"}, 10, 7);
  EXPECT_TRUE(o.fits);
  o = observation_tokens(tok, chat_format::none, {"123456"}, 10, 3);
  EXPECT_EQ(tok.decode(o.ids), "123");
  EXPECT_FALSE(o.fits);
}
