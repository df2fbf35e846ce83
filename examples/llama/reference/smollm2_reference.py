# Reference logits for SmolLM2-135M-Instruct's Q4_1 GGUF file from an
# implementation not written here: Hugging Face transformers' GGUF loading
# (the tensors dequantised to f32 by the `gguf` package, Q and K un-permuted
# to its own RoPE layout) and its LlamaForCausalLM, on the CPU in f32.
# Greedy from BOS (token 1) for STEPS steps with its KV cache; one line per
# step in seam-llama's reference format: `pos input_token next_token` and
# the 8 largest logits as `id:logit`, largest first.
#
#   python3 smollm2_reference.py GGUF [STEPS] > smollm2-135m-q4_1-greedy-from-bos.txt
#
# The file beside this script was made with STEPS = 32 by
# transformers 5.24.0, torch 2.15.0 and gguf (pip), on x86-64 Linux.
import os
import sys

import torch
from transformers import AutoModelForCausalLM


def main():
    path = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 32
    folder, name = os.path.split(os.path.abspath(path))
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    model.eval()
    token, past = 1, None
    with torch.no_grad():
        for pos in range(steps):
            out = model(input_ids=torch.tensor([[token]]), past_key_values=past, use_cache=True)
            past = out.past_key_values
            top = torch.topk(out.logits[0, -1].float(), 8)
            nxt = int(top.indices[0])
            pairs = " ".join(f"{int(i)}:{float(v):.6f}" for v, i in zip(top.values, top.indices))
            print(f"{pos} {token} {nxt} {pairs}", flush=True)
            token = nxt


if __name__ == "__main__":
    main()
