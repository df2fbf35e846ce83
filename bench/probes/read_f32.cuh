// The pure read of a weight buffer the probes time against: seam's
// `read_f32` (bench/src/measure/read.rs), a grid-stride float4 sum over n
// floats, one partial sum a block of 256 (launch it as <<<1024, 256>>>).
#pragma once

__global__ void read_f32(const float* w, float* partial, unsigned long long n) {
    __shared__ float sums[256];
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long t = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    float acc = 0.0f;
    const float4* q = (const float4*)w;
    for (unsigned long long i = t; i < n / 4; i += stride) {
        float4 v = q[i];
        acc += (v.x + v.y) + (v.z + v.w);
    }
    sums[threadIdx.x] = acc;
    __syncthreads();
    for (unsigned int h = 128; h > 0; h >>= 1) {
        if (threadIdx.x < h) sums[threadIdx.x] += sums[threadIdx.x + h];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = sums[0];
}
