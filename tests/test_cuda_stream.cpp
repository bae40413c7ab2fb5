// Each role's own CUDA stream and a device snapshot's event (runtime/model/cuda_stream.hpp,
// weight_sync.hpp). Without CUDA every stream and event call is a no-op: checked here, with
// snapshots taken, cast, loaded and copied to the host under the roles' scopes as before. The
// ordering itself needs a GPU: the last test checks it where CUDA is available and is skipped
// elsewhere (on the CPU machines the tests run on, it is untested).

#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/nn/module.h>

#include "runtime/model/cuda_stream.hpp"
#include "runtime/model/model.hpp"
#include "runtime/model/weight_sync.hpp"
#include "tests/tiny_model.hpp"

using namespace asyncrl;

namespace {

void expect_same_parameters(const CausalLM& a, const CausalLM& b) {
  auto pa = a->parameters(), pb = b->parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i)
    EXPECT_TRUE(at::equal(pa[i].cpu(), pb[i].cpu())) << "parameter " << i;
}

}  // namespace

TEST(CudaStream, CpuRolesHaveNoStreamAndTheirScopesChangeNothing) {
  auto s = own_stream::for_device("cpu");
  EXPECT_FALSE(s.active());
  EXPECT_EQ(s.device(), -1);
  s.synchronize();
  EXPECT_FALSE(own_stream().active());
  EXPECT_FALSE(own_stream::on_device(-1).active());
  {
    stream_scope on(s);
    stream_scope nested{own_stream()};
    auto t = torch::arange(4, torch::kFloat) * 2;  // (4,): 0 2 4 6
    EXPECT_EQ(t.sum().item<float>(), 12.f);
  }
}

TEST(CudaStream, EmptyEventsWaitForNothing) {
  stream_event none;
  EXPECT_TRUE(none.empty());
  EXPECT_TRUE(none.done());
  none.block_current();
  none.synchronize();
  auto cpu = stream_event::record(-1);  // what a snapshot on the CPU records
  EXPECT_TRUE(cpu.empty());
  EXPECT_TRUE(cpu.done());
  auto copy = cpu;
  copy.block_current();
  copy.synchronize();
}

// The trainer's scope around the snapshot and its cast, a rollouter's around the load, and the
// producer's references dropped before the reader's host copy: the same values as the host path.
TEST(CudaStream, DeviceSnapshotsLoadUnderTheRolesScopes) {
  const auto trainer = own_stream::for_device("cpu");
  const auto rollouter = own_stream::for_device("cpu");
  auto master = init_causal_lm(test::tiny_model_config(), 0.3, 5, torch::kCPU);
  weight_snapshot f32, b16;
  {
    stream_scope on(trainer);
    f32 = snapshot_weights(*master, 4, weight_dtype::float32, snapshot_place::device);
    b16 = convert_snapshot(f32, weight_dtype::bf16);
  }
  ASSERT_TRUE(f32.blob->on_device());
  ASSERT_TRUE(b16.blob->on_device());
  CausalLM reader(master->config());
  {
    stream_scope on(rollouter);
    load_snapshot(*reader, f32, /*alias=*/false);
  }
  expect_same_parameters(reader, master);
  f32 = {};  // the trainer's reference goes: the cast holds its own elements
  const auto host = host_snapshot(b16);
  EXPECT_FALSE(host.blob->on_device());
  EXPECT_EQ(host.version, 4);
  EXPECT_EQ(host.blob->data, snapshot_weights(*master, 4, weight_dtype::bf16).blob->data);
}

// On a GPU: the trainer's stream writes the parameters after a long chain of kernels and
// snapshots them without any host wait; a rollouter's load on its own stream must wait for that
// copy (the snapshot's event), or it reads the snapshot's memory before it is written.
TEST(CudaStream, GpuLoadWaitsForTheTrainersCopy) {
  if (!torch::cuda::is_available())
    GTEST_SKIP() << "no CUDA device: the streams' ordering is untested here";
  const auto trainer = own_stream::on_device(0);
  const auto rollouter = own_stream::on_device(0);
  if (!trainer.active()) GTEST_SKIP() << "this build of asyncrl has no ASYNCRL_TORCH_CUDA";
  ASSERT_TRUE(rollouter.active());
  const torch::Device gpu(torch::kCUDA, 0);
  const auto cfg = test::tiny_model_config();
  CausalLM master{nullptr}, reader{nullptr};
  {
    stream_scope on(trainer);
    master = init_causal_lm(cfg, 0.3, 5, gpu);
  }
  {
    stream_scope on(rollouter);
    reader = init_causal_lm(cfg, 0.3, 6, gpu);
  }
  trainer.synchronize();
  rollouter.synchronize();
  weight_snapshot snap;
  {
    stream_scope on(trainer);
    torch::NoGradGuard ng;
    // (8192, 8192), every element 2^-13: x @ x is x again, exactly. 20 products: a few hundred
    // ms of the trainer's stream before the writes below, which depend on them.
    auto x = torch::full({8192, 8192}, 1.0 / 8192, torch::TensorOptions().device(gpu));
    for (int i = 0; i < 20; ++i)
      x = x.matmul(x);
    const auto zero = x.sum() * 0;  // 0-dim, on the device: no host read
    auto params = master->parameters();
    for (size_t k = 0; k < params.size(); ++k)
      params[k].zero_().add_(zero + (3.25 + static_cast<double>(k)));
    snap = snapshot_weights(*master, 1, weight_dtype::float32, snapshot_place::device);
  }
  std::vector<at::Tensor> got;
  {
    stream_scope on(rollouter);
    load_snapshot(*reader, snap, /*alias=*/false);
    snap = {};  // the trainer's reference goes while the load may still be queued
    for (auto& p : reader->parameters())
      got.push_back(p.detach().cpu());  // waits for the rollouter's stream only
  }
  for (size_t k = 0; k < got.size(); ++k)
    EXPECT_TRUE(at::equal(got[k], torch::full_like(got[k], 3.25 + static_cast<double>(k))))
        << "parameter " << k << " read before the trainer's copy";
}
