#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/): small valid inputs
of each format, built from their documented layouts and the repository's fixtures, plus a few
edge cases. The fuzzer's own finds are added next to them (scripts/fuzz.sh run). Needs
/usr/bin/python3 with python3-msgpack."""
import hashlib, json, os, struct, sys
import msgpack

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, 'tests', 'fuzz', 'corpus')


def put(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), 'wb') as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def safetensors(tensors, metadata=None):
    header, blob = {}, b''
    for name, dtype, shape, raw in tensors:
        header[name] = {'dtype': dtype, 'shape': shape, 'data_offsets': [len(blob), len(blob) + len(raw)]}
        blob += raw
    if metadata:
        header['__metadata__'] = metadata
    h = json.dumps(header).encode()
    h += b' ' * (-len(h) % 8)
    return struct.pack('<Q', len(h)) + h + blob


put('safetensors', 'f32_bf16_i64', safetensors([
    ('a', 'F32', [2, 2], struct.pack('<4f', 1, -2, 0.5, 3)),
    ('b', 'BF16', [3], struct.pack('<3H', 0x3f80, 0xc000, 0x7f80)),
    ('c', 'I64', [1], struct.pack('<q', 7)),
    ('d', 'F16', [2], struct.pack('<2H', 0x3c00, 0x7c00)),
    ('e', 'F64', [], struct.pack('<d', 2.5))], {'format': 'pt'}))
put('safetensors', 'empty', safetensors([]))

# Checkpoints: the whole file (checkpoint_file.hpp's layout), and a payload alone (the target
# puts a valid header with its checksum in front of each input as well).
def payload(sections):
    out = struct.pack('<I', len(sections))
    for name in sorted(sections):
        data = sections[name]
        out += struct.pack('<I', len(name)) + name.encode() + struct.pack('<Q', len(data)) + data
    return out


p = payload({'controller': b'\x01\x02\x03', 'trainer': b'state bytes', 'queue': b''})
head = b'ASYNCRLC' + struct.pack('<IIqQ', 3, 0, 12, len(p)) + hashlib.sha256(p).digest()
put('checkpoint', 'file', head + p)
put('checkpoint', 'payload', p)
put('checkpoint', 'payload_empty', payload({}))

# Weights: pack_weights' msgpack map; a chunk series as the weights target reads it.
blob = struct.pack('<6f', 1, 2, 3, 4, 5, 6)
put('weights', 'float32', msgpack.packb({'version': 3, 'names': ['w', 'b'], 'shapes': [[2, 2], [2]],
                                         'dtype': 'float32', 'data': blob}))
put('weights', 'bf16', msgpack.packb({'version': 1, 'names': ['w'], 'shapes': [[2]],
                                      'dtype': 'bf16', 'data': struct.pack('<2H', 0x3f80, 0)}))
put('weights', 'no_dtype', msgpack.packb({'version': 0, 'names': [], 'shapes': [], 'data': b''}))
chunk = lambda v, i, c, off, total, data: (bytes([v + 1, i + 1, c]) + struct.pack('<HH', off + 8, total)
                                           + bytes([len(data)]) + data)
put('weights', 'chunks', chunk(1, 0, 2, 0, 8, b'abcd') + chunk(1, 1, 2, 4, 8, b'efgh'))

# Scorer frames: an answer for uid 7, answers with faults, a request.
put('scorer_frames', 'answer', msgpack.packb({'uid': 7, 'score': 1.0, 'info': {'why': 'ok'}}))
put('scorer_frames', 'answer_int', msgpack.packb({'uid': 7, 'score': 1}))
put('scorer_frames', 'answer_nan', msgpack.packb({'uid': 7, 'score': float('nan')}))
put('scorer_frames', 'answer_other_uid', msgpack.packb({'uid': 8, 'score': 0.5}))
put('scorer_frames', 'request', msgpack.packb({'uid': 7, 'prompt': 'p', 'response': '#### 3',
                                               'ground_truth': '3', 'extra': {'index': 1}}))
put('scorer_frames', 'header', struct.pack('>I', 16) + msgpack.packb({'uid': 7, 'score': 0}))

# Config: the shipped files (their `base:` cannot resolve here: an error path too), and
# overrides after NUL bytes.
for name in ('demo.yaml', 'chaos/base.yaml', 'qwen2_5_0_5b_gsm8k.yaml'):
    with open(os.path.join(ROOT, 'configs', name)) as f:
        put('config', name.replace('/', '_'), f.read())
put('config', 'overrides', 'trainer:\n  lr: 1e-3\n\0trainer.total_steps=3\0rollout.n=2\0reward.function=external')
put('config', 'bad_key', 'trainer:\n  nope: 1\n')

# Tokenizer: odd first byte = text for the fixture tokenizer; even = a tokenizer.json.
for i, text in enumerate(['Hello, world! 12 + 30 = 42\n', '<|im_start|>user\nwhat?<|im_end|>',
                          'caf\u00e9 \u4f60\u597d \U0001f600 \xff', '   \t\n\n  x']):
    put('tokenizer', f'text{i}', b'\x01' + text.encode('utf-8', 'surrogatepass'))
with open(os.path.join(ROOT, 'tests', 'fixtures', 'hf_tiny', 'tokenizer.json'), 'rb') as f:
    put('tokenizer', 'hf_tiny_json', b'\x00' + f.read())
put('tokenizer', 'minimal_json', b'\x00' + json.dumps({
    'model': {'type': 'BPE', 'vocab': {'a': 0, 'b': 1, 'ab': 2}, 'merges': ['a b']},
    'added_tokens': [], 'normalizer': None, 'pre_tokenizer': None, 'decoder': None}).encode())

# JSONL: GSM8K rows, chat-message prompts, numbers as answers.
with open(os.path.join(ROOT, 'tests', 'fixtures', 'gsm8k', 'train.jsonl')) as f:
    put('jsonl', 'gsm8k', ''.join(f.readlines()[:3]))
put('jsonl', 'chat', json.dumps({'prompt': [{'role': 'system', 'content': 's'},
                                            {'role': 'user', 'content': 'q'}], 'answer': 4}) + '\n')
put('jsonl', 'nested', json.dumps({'a': {'b': ['x']}, 'answer': '#### 5'}) + '\n\n')

# Console: commands, scripts, quotes.
for i, line in enumerate(['status', 'set trainer.lr 1e-5; checkpoint', 'generate 12+7=',
                          'kill rollouter 1', 'help set', 'set "a b" 3', 'workers; metrics 5',
                          'hang reward', 'delay-sync 100', 'eval']):
    put('console', f'cmd{i}', line)
print('seeds written under', OUT)
