# torch.mm (1 x H) . (H x H) f32, TF32 off, 8 weights rotated, CUDA events.
import torch
torch.backends.cuda.matmul.allow_tf32 = False
for h in (4096, 8192):
    ws = [torch.rand(h, h, device="cuda") - 0.5 for _ in range(8)]
    x = torch.rand(1, h, device="cuda"); y = torch.empty(1, h, device="cuda")
    for i in range(16): torch.mm(x, ws[i % 8], out=y)
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for i in range(200): torch.mm(x, ws[i % 8], out=y)
    b.record(); b.synchronize()
    us = a.elapsed_time(b) * 1000 / 200
    print(f"H={h} torch.mm                    {us:8.2f} us {h*h*4/us/1e3:7.0f} GB/s")
    del ws
