#!/bin/bash
# `asyncrl chaos` on every config in configs/ (the chaos/ ones have their own tests): each
# file's mode, schedule, reward and supervision settings under every fault, at a tiny size so
# that the whole series stays bounded (about half a minute per config on 2 cores). A file that
# needs what a checkout lacks (a downloaded model or data set) runs on the test fixtures in
# their place, and says so. Fails when any round of any config fails, naming it.
#   tests/chaos_every_config.sh ASYNCRL_CLI SOURCE_DIR OUT_DIR
set -u
cli=$1 src=$2 out=$3
cd "$src" || exit 2
# Tiny model and batches; 8 steps with a checkpoint every 2 (the checkpoint rounds need
# total_steps >= 3 * every_steps + 2).
# The mini-batch keeps its share of the batch: sync and periodic configs train on-policy (one
# mini-batch per batch), stream_off_policy takes two per batch.
shrink=(trainer.total_steps=8 checkpoint.every_steps=2 runtime.eval_before=false
        runtime.eval_after=false data.train_size=256 data.test_size=8 data.train_batch_size=4
        rollout.n=4 rollout.max_new_tokens=8 rollout.max_batch=16
        model.init.hidden_size=32 model.init.intermediate_size=64 model.init.num_hidden_layers=2)
failed=()
n=0
for cfg in configs/*.yaml; do
  name=$(basename "$cfg" .yaml)
  batch=$("$cli" config --config "$cfg" --get data.train_batch_size)
  mini=$("$cli" config --config "$cfg" --get trainer.ppo_mini_batch_size)
  extra=("trainer.ppo_mini_batch_size=$(( mini * 4 / batch > 0 ? mini * 4 / batch : 1 ))")
  model=$("$cli" config --config "$cfg" --get model.path)
  if [[ -n "$model" && ! -d "$model" ]]; then
    echo "chaos_every_config: $name: $model is not here; a fresh model with tests/fixtures/hf_tiny's tokenizer instead"
    extra+=(model.path= model.tokenizer=tests/fixtures/hf_tiny data.max_prompt_length=96
            model.init.max_position_embeddings=192)
  fi
  for key in data.train_path data.test_path; do
    path=$("$cli" config --config "$cfg" --get "$key")
    if [[ -n "$path" && ! -f "$path" ]]; then
      fixture=tests/fixtures/gsm8k/$( [[ $key == data.train_path ]] && echo train || echo test ).jsonl
      echo "chaos_every_config: $name: $path is not here; $fixture instead"
      extra+=("$key=$fixture")
    fi
  done
  n=$((n + 1))
  start=$SECONDS
  if "$cli" chaos --config "$cfg" "${shrink[@]}" "${extra[@]}" "runtime.run_dir=$out/$name" \
      > "$out.$name.log" 2>&1; then
    echo "chaos_every_config: $name ok ($((SECONDS - start)) s)"
  else
    echo "chaos_every_config: $name FAILED ($((SECONDS - start)) s):"
    tail -20 "$out.$name.log"
    failed+=("$name")
  fi
done
if ((n == 0)); then
  echo "chaos_every_config: no config found under $src/configs"
  exit 1
fi
if ((${#failed[@]} > 0)); then
  echo "chaos_every_config: ${#failed[@]} of $n configs failed: ${failed[*]}"
  exit 1
fi
echo "chaos_every_config: all $n configs passed every round"
