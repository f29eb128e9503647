/* Optimizer steps over a range of the flat buffers, one element a thread,
 * with the CPU table's semantics (ops.h): SGD with momentum, Nesterov and
 * coupled weight decay as PyTorch; AdamW with decoupled decay. fp32 master
 * weights and state whatever the device's precision. */
#include "cuda_int.h"

#define THREADS 256

static __global__ void sgd_kernel(float *p, float *mom, const float *g, size_t n, float lr,
                                  float mu, float wd, int nesterov)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float gi = g[i] + wd * p[i];
        float step = gi;
        if (mu != 0.0f) {
            float m = mu * mom[i] + gi;
            mom[i] = m;
            step = nesterov ? gi + mu * m : m;
        }
        p[i] -= lr * step;
    }
}

void cu_sgd_step(rumor_device_t *d, float *p, float *mom, const float *g, size_t n, float lr,
                 float momentum, float wd, int nesterov)
{
    if (!n)
        return;
    CU_ENTER(d);
    CU_LAUNCH(sgd_kernel, cu_blocks(n, THREADS), THREADS, 0, cu_of(d)->cur, p, mom, g, n, lr,
              momentum, wd, nesterov);
    CU_LAUNCHED(d, "sgd_step");
}

static __global__ void adamw_kernel(float *p, float *m, float *v, const float *g, size_t n,
                                    float lr, float b1, float b2, float eps, float wd,
                                    float inv_bc1, float inv_bc2)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float gi = g[i], pi = p[i];
        pi -= lr * wd * pi;
        float mi = b1 * m[i] + (1.0f - b1) * gi;
        float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = pi - lr * (mi * inv_bc1) / (sqrtf(vi * inv_bc2) + eps);
    }
}

void cu_adamw_step(rumor_device_t *d, float *p, float *m, float *v, const float *g, size_t n,
                   float lr, float b1, float b2, float eps, float wd, float bc1, float bc2)
{
    if (!n)
        return;
    CU_ENTER(d);
    CU_LAUNCH(adamw_kernel, cu_blocks(n, THREADS), THREADS, 0, cu_of(d)->cur, p, m, v, g, n, lr,
              b1, b2, eps, wd, 1.0f / bc1, 1.0f / bc2);
    CU_LAUNCHED(d, "adamw_step");
}
