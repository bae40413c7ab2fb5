#include "apps/asyncrl/serve_command.hpp"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <stdexcept>

#include "actors/run_checkpoint.hpp"
#include "apps/asyncrl/run_setup.hpp"
#include "apps/asyncrl/signals.hpp"
#include "apps/asyncrl/train_command.hpp"
#include "runtime/checkpoint/checkpoint_file.hpp"
#include "runtime/cluster/address.hpp"
#include "runtime/config/run_config.hpp"
#include "runtime/model/model_io.hpp"
#include "runtime/serve/openai_api.hpp"
#include "runtime/train/policy_weights.hpp"

namespace asyncrl {

namespace {

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void send_error(httplib::Response& res, const api_error& e) {
  res.status = e.status;
  res.set_content(error_body(e), "application/json");
}

api_error error_of(int status, std::string type, std::string message, std::string code = "") {
  api_error e;
  e.status = status;
  e.type = std::move(type);
  e.message = std::move(message);
  e.code = std::move(code);
  return e;
}

// Engine updates of one request, from the engine thread to the HTTP thread that answers it.
struct request_channel {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<job_update> updates;
};

// Refuses what would be unsafe before anything listens: a non-loopback address needs TLS (or
// --allow-insecure) and an API key, like the cluster listener.
void check_exposure(const serve_command& c, const std::string& key) {
  if ((c.tls_cert.empty()) != (c.tls_key.empty()))
    throw std::runtime_error("serve: --tls-cert and --tls-key go together");
  if (is_loopback_host(c.host)) return;
  if (c.tls_cert.empty() && !c.allow_insecure)
    throw std::runtime_error("serve: --host " + c.host +
                             " is not a loopback address: give --tls-cert and --tls-key, or "
                             "--allow-insecure on a network you trust (docs/serve.md)");
  if (key.empty())
    throw std::runtime_error("serve: --host " + c.host +
                             " is not a loopback address: set an API key (--api-key or "
                             "ASYNCRL_API_KEY); clients send it as Authorization: Bearer KEY");
}

class server {
 public:
  server(const serve_command& c, served_model m, serve_engine& engine, std::string key)
      : c_(c), model_(std::move(m)), engine_(engine), key_(std::move(key)) {}

  void install(httplib::Server& svr) {
    // Every request in flight holds a thread while it waits for its tokens: the pool has one
    // per allowed request, and a few more so that those over the limit get their 429 at once.
    const auto threads = static_cast<size_t>(c_.limits.max_concurrent) + 4;
    svr.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    svr.set_payload_max_length(c_.limits.max_body_bytes);
    svr.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (key_.empty() || req.get_header_value("Authorization") == "Bearer " + key_)
        return httplib::Server::HandlerResponse::Unhandled;
      send_error(res, error_of(401, "invalid_request_error",
                               "Incorrect API key provided: send Authorization: Bearer KEY",
                               "invalid_api_key"));
      return httplib::Server::HandlerResponse::Handled;
    });
    svr.set_error_handler(httplib::Server::HandlerWithResponse(
        [this](const httplib::Request& req, httplib::Response& res) {
          if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
          std::string msg = "HTTP status " + std::to_string(res.status);
          if (res.status == 404) msg = "Unknown request URL: " + req.method + " " + req.path;
          if (res.status == 413)
            msg = "the request body is over the server's limit of " +
                  std::to_string(c_.limits.max_body_bytes) + " bytes";
          send_error(res, error_of(res.status, "invalid_request_error", msg));
          return httplib::Server::HandlerResponse::Handled;
        }));
    svr.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(models_body(model_, engine_.version()), "application/json");
    });
    svr.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
      answer(api_endpoint::chat, req, res);
    });
    svr.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      answer(api_endpoint::completions, req, res);
    });
  }

 private:
  // Counts a request in flight for as long as it lives (a stream outlives its handler).
  struct slot_guard {
    std::atomic<int32_t>* n;
    explicit slot_guard(std::atomic<int32_t>* c) : n(c) {}
    ~slot_guard() { --*n; }
  };

  void answer(api_endpoint ep, const httplib::Request& req, httplib::Response& res) {
    auto parsed = parse_api_request(ep, req.body, c_.limits);
    if (auto* e = std::get_if<api_error>(&parsed)) return send_error(res, *e);
    auto r = std::get<api_request>(std::move(parsed));
    auto made = make_job(r, model_, engine_.max_seq_len(), c_.limits);
    if (auto* e = std::get_if<api_error>(&made)) return send_error(res, *e);
    auto job = std::get<serve_job>(std::move(made));
    if (in_flight_.fetch_add(1) >= c_.limits.max_concurrent) {
      --in_flight_;
      return send_error(res, error_of(429, "rate_limit_error",
                                      "the server has " + std::to_string(c_.limits.max_concurrent) +
                                          " requests in flight (--max-concurrent); retry later",
                                      "too_many_requests"));
    }
    auto guard = std::make_shared<slot_guard>(&in_flight_);
    const auto id = std::string(ep == api_endpoint::chat ? "chatcmpl-" : "cmpl-") +
                    std::to_string(next_id_.fetch_add(1));
    const auto created = unix_now();
    const auto prompt_tokens = static_cast<int64_t>(job.prompt.size());
    auto ch = std::make_shared<request_channel>();
    const auto handle = engine_.submit(std::move(job), [ch](const job_update& u) {
      std::lock_guard<std::mutex> lock(ch->mu);
      ch->updates.push_back(u);
      ch->cv.notify_all();
    });
    if (r.stream)
      stream(r, res, ch, handle, id, created, prompt_tokens, guard);
    else
      whole(r, res, ch, id, created, prompt_tokens);
  }

  void whole(const api_request& r, httplib::Response& res,
             const std::shared_ptr<request_channel>& ch, const std::string& id, int64_t created,
             int64_t prompt_tokens) {
    std::vector<choice_result> choices(static_cast<size_t>(r.n));
    int64_t version = 0;
    std::string error;
    for (bool done = false; !done;) {
      std::unique_lock<std::mutex> lock(ch->mu);
      ch->cv.wait(lock, [&] { return !ch->updates.empty(); });
      auto u = std::move(ch->updates.front());
      ch->updates.pop_front();
      lock.unlock();
      for (const auto& d : u.deltas) {
        auto& c = choices[static_cast<size_t>(d.index)];
        c.text += d.text;
        c.tokens.insert(c.tokens.end(), d.tokens.begin(), d.tokens.end());
        c.logprobs.insert(c.logprobs.end(), d.logprobs.begin(), d.logprobs.end());
        if (!d.finish_reason.empty()) c.finish_reason = d.finish_reason;
      }
      version = u.version;
      error = u.error;
      done = u.done;
    }
    if (!error.empty()) return send_error(res, error_of(500, "server_error", error));
    res.set_content(response_body(r, model_, id, created, choices, prompt_tokens, version),
                    "application/json");
  }

  void stream(const api_request& r, httplib::Response& res, std::shared_ptr<request_channel> ch,
              uint64_t handle, const std::string& id, int64_t created, int64_t prompt_tokens,
              std::shared_ptr<slot_guard> guard) {
    auto state = std::make_shared<stream_state>();
    auto finished = std::make_shared<bool>(false);
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, r, ch, id, created, prompt_tokens, state, finished](size_t,
                                                                   httplib::DataSink& sink) {
          std::unique_lock<std::mutex> lock(ch->mu);
          // Wake now and then to notice a client that went away while nothing was generated.
          while (ch->updates.empty()) {
            ch->cv.wait_for(lock, std::chrono::seconds(1));
            if (ch->updates.empty() && !sink.is_writable()) return false;
          }
          auto u = std::move(ch->updates.front());
          ch->updates.pop_front();
          lock.unlock();
          std::string out;
          if (!u.error.empty()) {
            out = "data: " + error_body(error_of(500, "server_error", u.error)) + "\n\n";
          } else {
            out = stream_chunks(r, model_, id, created, u, *state);
          }
          if (u.done) {
            out +=
                stream_end(r, model_, id, created, prompt_tokens, u.completion_tokens, u.version);
            *finished = true;
          }
          if (!out.empty() && !sink.write(out.data(), out.size())) return false;
          if (u.done) sink.done();
          return true;
        },
        [this, handle, finished, guard](bool) {
          if (!*finished) engine_.cancel(handle);  // the client went away: free its slots
        });
  }

  const serve_command& c_;
  served_model model_;
  serve_engine& engine_;
  std::string key_;
  std::atomic<int32_t> in_flight_{0};
  std::atomic<uint64_t> next_id_{1};
};

// The newest checkpoint of a followed run: its path and the trainer state in it.
struct followed_checkpoint {
  std::string path;
  std::string trainer_state;
};

// The newest checkpoint in `dir` that verifies (a newer damaged one is skipped, as a resume
// skips it); nullopt when there is none yet.
std::optional<followed_checkpoint> newest_checkpoint(const std::string& dir) {
  std::vector<std::string> skipped;
  auto p = load_resume_point(dir, &skipped);
  if (!p) return std::nullopt;
  return followed_checkpoint{p->path, std::move(p->run.trainer.state)};
}

// Looks for a newer checkpoint of the followed run now and then, reads its policy into a copy
// of the model off the engine thread, and hands it to the engine to copy in between two
// decode rounds.
class follower {
 public:
  follower(const serve_command& c, std::string dir, serve_engine& engine, const CausalLM& shape,
           std::string path)
      : c_(c), dir_(std::move(dir)), engine_(engine), shape_(shape), path_(std::move(path)) {
    thread_ = std::thread([this] { loop(); });
  }
  ~follower() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  void loop() {
    const auto every = std::chrono::duration<double>(std::max(0.1, c_.follow_every_s));
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, every, [this] { return stop_; })) {
      lock.unlock();
      try {
        auto files = list_checkpoints(dir_);
        // Only a new newest file is looked at: one that did not verify is not re-read at
        // every poll (the one before it is served until a newer one arrives).
        if (!files.empty() && files.back() != path_ && files.back() != seen_) {
          seen_ = files.back();
          if (auto ck = newest_checkpoint(dir_); ck && ck->path != path_) {
            // A copy of the model takes the new weights here, so the engine only copies
            // tensors between two rounds and never waits on the disk.
            auto next = std::make_shared<CausalLMImpl>(shape_->config());
            next->to(shape_->parameters().front().device());
            const auto version = load_policy_from_trainer_state(ck->trainer_state, CausalLM(next));
            engine_.stage_weights(
                [next](CausalLMImpl& m) {
                  torch::NoGradGuard ng;
                  auto to = m.parameters();
                  auto from = next->parameters();
                  for (size_t i = 0; i < to.size(); ++i)
                    to[i].copy_(from[i]);
                },
                version);
            spdlog::info("serve: weights version {} from {}", version, ck->path);
            path_ = ck->path;
          }
        }
      } catch (const std::exception& e) {
        // A checkpoint that does not fit this model: keep serving the current weights.
        spdlog::warn("serve: --follow: {}", e.what());
      }
      lock.lock();
    }
  }

  const serve_command& c_;
  std::string dir_;
  serve_engine& engine_;
  CausalLM shape_;
  std::string path_;  // the checkpoint being served
  std::string seen_;  // the newest checkpoint file looked at
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// The model of a followed run: its config's starting policy (model.path or model.init, with
// its tokenizer), with the newest checkpoint's weights when there is one.
model_bundle open_followed_run(const serve_command& c, std::string& ckpt_dir, std::string& path,
                               int64_t& version) {
  const auto yaml = c.follow + "/config.yaml";
  if (!std::ifstream(yaml))
    throw std::runtime_error("serve --follow " + c.follow +
                             ": no config.yaml there (not a run "
                             "directory?)");
  auto lc = load_config(yaml, {"runtime.run_dir=" + c.follow});
  ckpt_dir = checkpoint_dir_of(lc->cfg);
  check_device(c.model.device, "--device");
  auto b = load_or_init_policy(lc->cfg.model, lc->cfg.runtime.seed, torch::Device(c.model.device));
  if (auto ck = newest_checkpoint(ckpt_dir)) {
    version = load_policy_from_trainer_state(ck->trainer_state, b.model);
    path = ck->path;
  }
  return b;
}

}  // namespace

int run_serve_command(const serve_command& c) {
  std::string key = c.api_key;
  if (key.empty())
    if (const char* env = std::getenv("ASYNCRL_API_KEY")) key = env;
  check_exposure(c, key);

  if (c.follow.empty() == c.model.model_dir.empty())
    throw std::runtime_error("serve: give one of --model DIR and --follow RUN_DIR");
  int64_t version = 0;
  std::string ckpt_dir, ckpt_path;
  auto b =
      c.follow.empty() ? open_model(c.model) : open_followed_run(c, ckpt_dir, ckpt_path, version);
  const auto source = c.follow.empty() ? c.model.model_dir : c.follow;
  const auto& tok = need_tokenizer(b, source, "serve needs a tokenizer");
  served_model m;
  m.id = c.served_model_name;
  if (m.id.empty()) m.id = std::filesystem::path(source).lexically_normal().filename().string();
  if (m.id.empty() || m.id == ".") m.id = "asyncrl";
  m.tok = b.tokenizer;
  m.format = make_prompt_format(tok, c.chat, c.system_prompt);
  m.created = unix_now();

  generator_options go;
  go.max_slots = c.max_batch;
  go.max_seq_len = c.max_context > 0 ? std::min(c.max_context, b.config.max_position_embeddings)
                                     : b.config.max_position_embeddings;
  go.seed = c.seed;
  go.prefill_batch = std::min<int64_t>(c.max_batch, 64);
  serve_engine engine(b.model.ptr(), b.tokenizer, go, c.steps_per_round, version);
  std::unique_ptr<follower> follow;
  if (!c.follow.empty())
    follow = std::make_unique<follower>(c, ckpt_dir, engine, b.model, ckpt_path);

  std::unique_ptr<httplib::Server> svr;
  if (c.tls_cert.empty())
    svr = std::make_unique<httplib::Server>();
  else
    svr = std::make_unique<httplib::SSLServer>(c.tls_cert.c_str(), c.tls_key.c_str());
  if (!svr->is_valid())
    throw std::runtime_error("serve: cannot use --tls-cert " + c.tls_cert + " / --tls-key " +
                             c.tls_key);
  server api(c, m, engine, key);
  api.install(*svr);
  int port = c.port;
  if (port == 0)
    port = svr->bind_to_any_port(c.host);
  else if (!svr->bind_to_port(c.host, port))
    port = -1;
  if (port < 0)
    throw std::runtime_error("serve: cannot listen on " +
                             join_host_port(c.host, static_cast<uint16_t>(c.port)) +
                             " (in use, or not an address of this machine)");
  interrupt_watch signals([&](int) { svr->stop(); });
  // One line on stdout that scripts wait for, with the address to give clients.
  std::cout << "asyncrl serve: " << (c.tls_cert.empty() ? "http" : "https") << "://"
            << join_host_port(c.host, static_cast<uint16_t>(port)) << "/v1 model " << m.id
            << " version " << version << " max_context " << go.max_seq_len << std::endl;
  svr->listen_after_bind();
  std::cout << "asyncrl serve: stopped after " << engine.stats().requests << " requests"
            << std::endl;
  return 0;
}

}  // namespace asyncrl
