/* Element-wise ops: grid-stride loops, four floats a thread (16-byte loads)
 * where every pointer is 16-byte aligned, one otherwise. They are
 * memory-bound: the benchmark compares them with a device-to-device copy.
 * Semantics are the CPU table's (cpu_ops.c), GELU's tanh form included. */
#include "cuda_int.h"

#define THREADS 256

static inline int aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

/* The launcher of a kernel over n elements, one a thread; the rest of its
 * arguments are the kernel's. */
#define LAUNCH_N(d, kernel, what, n, ...)                                                      \
    do {                                                                                       \
        if (!(n))                                                                              \
            return;                                                                            \
        CU_ENTER(d);                                                                           \
        CU_LAUNCH(kernel, cu_blocks((n), THREADS), THREADS, 0, cu_of(d)->cur, __VA_ARGS__);    \
        CU_LAUNCHED(d, what);                                                                  \
    } while (0)

#define UNPAREN(...) __VA_ARGS__

/* The launcher of an op with a kernel for float4s: name4_kernel over the
 * first n4 = n / 4 float4s when `aligned` (every pointer 16-byte aligned),
 * then name_kernel (ELTWISE's) over the other m elements from o = 4 n4.
 * ARGS4 and ARGS1 are their argument lists, in parentheses, in terms of
 * n4, o and m. */
#define LAUNCH_4(d, name, what, n, aligned, ARGS4, ARGS1)                                     \
    do {                                                                                       \
        if (!(n))                                                                              \
            return;                                                                            \
        CU_ENTER(d);                                                                           \
        cudaStream_t s_ = cu_of(d)->cur;                                                       \
        size_t n4 = (aligned) ? (n) / 4 : 0, o = 4 * n4, m = (n) - o;                          \
        if (n4)                                                                                \
            CU_LAUNCH(name##4_kernel, cu_blocks(n4, THREADS), THREADS, 0, s_, UNPAREN ARGS4);  \
        if (m)                                                                                 \
            CU_LAUNCH(name##_kernel, cu_blocks(m, THREADS), THREADS, 0, s_, UNPAREN ARGS1);    \
        CU_LAUNCHED(d, what);                                                                  \
    } while (0)

/* one body for the vector and the scalar kernel: F(i, ...) on element i */
#define ELTWISE(name, params, args, body)                                                      \
    static __global__ void name##_kernel params                                                \
    {                                                                                          \
        for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;                  \
             i += (size_t)gridDim.x * blockDim.x) {                                            \
            body;                                                                              \
        }                                                                                      \
    }

/* ------------------------------------------------------------ axpy etc. */

static __global__ void axpy4_kernel(float4 *y, float a, const float4 *x, size_t n4)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4;
         i += (size_t)gridDim.x * blockDim.x) {
        float4 v = y[i], u = x[i];
        v.x += a * u.x;
        v.y += a * u.y;
        v.z += a * u.z;
        v.w += a * u.w;
        y[i] = v;
    }
}
ELTWISE(axpy, (float *y, float a, const float *x, size_t n), (y, a, x, n), y[i] += a * x[i])

void cu_axpy(rumor_device_t *d, float *y, float a, const float *x, size_t n)
{
    LAUNCH_4(d, axpy, "axpy", n, aligned16(y) && aligned16(x),
             ((float4 *)y, a, (const float4 *)x, n4), (y + o, a, x + o, m));
}

static __global__ void scale4_kernel(float4 *y, float a, size_t n4)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4;
         i += (size_t)gridDim.x * blockDim.x) {
        float4 v = y[i];
        v.x *= a;
        v.y *= a;
        v.z *= a;
        v.w *= a;
        y[i] = v;
    }
}
ELTWISE(scale, (float *y, float a, size_t n), (y, a, n), y[i] *= a)

void cu_scale(rumor_device_t *d, float *y, float a, size_t n)
{
    LAUNCH_4(d, scale, "scale", n, aligned16(y), ((float4 *)y, a, n4), (y + o, a, m));
}

static __global__ void fill4_kernel(float4 *y, float v, size_t n4)
{
    float4 f = make_float4(v, v, v, v);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] = f;
}
ELTWISE(fill, (float *y, float v, size_t n), (y, v, n), y[i] = v)

void cu_fill(rumor_device_t *d, float *y, float v, size_t n)
{
    LAUNCH_4(d, fill, "fill", n, aligned16(y), ((float4 *)y, v, n4), (y + o, v, m));
}

static __global__ void add4_kernel(float4 *y, const float4 *a, const float4 *b, size_t n4)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4;
         i += (size_t)gridDim.x * blockDim.x) {
        float4 u = a[i], v = b[i];
        y[i] = make_float4(u.x + v.x, u.y + v.y, u.z + v.z, u.w + v.w);
    }
}
ELTWISE(add, (float *y, const float *a, const float *b, size_t n), (y, a, b, n),
        y[i] = a[i] + b[i])

void cu_add(rumor_device_t *d, float *y, const float *a, const float *b, size_t n)
{
    LAUNCH_4(d, add, "add", n, aligned16(y) && aligned16(a) && aligned16(b),
             ((float4 *)y, (const float4 *)a, (const float4 *)b, n4), (y + o, a + o, b + o, m));
}

/* y = a x + b y; b == 0 writes a x without reading y (a NaN in y is gone) */
static __global__ void axpby4_kernel(float4 *y, float a, const float4 *x, float b, size_t n4)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4;
         i += (size_t)gridDim.x * blockDim.x) {
        float4 u = x[i];
        float4 v = b != 0.0f ? y[i] : make_float4(0.f, 0.f, 0.f, 0.f);
        y[i] = b != 0.0f ? make_float4(a * u.x + b * v.x, a * u.y + b * v.y, a * u.z + b * v.z,
                                       a * u.w + b * v.w)
                         : make_float4(a * u.x, a * u.y, a * u.z, a * u.w);
    }
}
ELTWISE(axpby, (float *y, float a, const float *x, float b, size_t n), (y, a, x, b, n),
        y[i] = b != 0.0f ? a * x[i] + b * y[i] : a * x[i])

void cu_axpby(rumor_device_t *d, float *y, float a, const float *x, float b, size_t n)
{
    LAUNCH_4(d, axpby, "axpby", n, aligned16(y) && aligned16(x),
             ((float4 *)y, a, (const float4 *)x, b, n4), (y + o, a, x + o, b, m));
}

/* ------------------------------------------------------------ activations */

ELTWISE(relu_fwd, (float *y, const float *x, size_t n), (y, x, n),
        y[i] = x[i] > 0.0f ? x[i] : 0.0f)
ELTWISE(relu_bwd, (float *dx, const float *x, const float *dy, size_t n), (dx, x, dy, n),
        dx[i] = x[i] > 0.0f ? dy[i] : 0.0f)

void cu_relu_forward(rumor_device_t *d, float *y, const float *x, size_t n)
{
    LAUNCH_N(d, relu_fwd_kernel, "relu_forward", n, y, x, n);
}

void cu_relu_backward(rumor_device_t *d, float *dx, const float *x, const float *dy, size_t n)
{
    LAUNCH_N(d, relu_bwd_kernel, "relu_backward", n, dx, x, dy, n);
}

#define GELU_SCALE 0.7978845608028654f /* sqrt(2/pi) */

/* 1 + tanh(u) and 1 - tanh(u) from one exp of -2|u|, as the CPU computes
 * them (neither cancels in GELU's tails) */
static __device__ __forceinline__ void tanh_pm(float u, float *one_plus, float *one_minus)
{
    float a = expf(-2.0f * fabsf(u));
    float big = 2.0f / (1.0f + a), small = big * a;
    *one_plus = u >= 0.0f ? big : small;
    *one_minus = u >= 0.0f ? small : big;
}

static __device__ __forceinline__ float gelu_f(float v)
{
    float p, m;
    tanh_pm(GELU_SCALE * (v + 0.044715f * v * v * v), &p, &m);
    return 0.5f * v * p;
}

static __device__ __forceinline__ float gelu_b(float v, float dy)
{
    float p, m;
    tanh_pm(GELU_SCALE * (v + 0.044715f * v * v * v), &p, &m);
    float sech2 = p * m; /* 1 - tanh^2 */
    float du = GELU_SCALE * (1.0f + 3.0f * 0.044715f * v * v);
    return dy * (0.5f * p + 0.5f * v * sech2 * du);
}

static __global__ void gelu_fwd4_kernel(float4 *y, const float4 *x, size_t n4)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4;
         i += (size_t)gridDim.x * blockDim.x) {
        float4 v = x[i];
        y[i] = make_float4(gelu_f(v.x), gelu_f(v.y), gelu_f(v.z), gelu_f(v.w));
    }
}
ELTWISE(gelu_fwd, (float *y, const float *x, size_t n), (y, x, n), y[i] = gelu_f(x[i]))

static __global__ void gelu_bwd4_kernel(float4 *dx, const float4 *x, const float4 *dy, size_t n4)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4;
         i += (size_t)gridDim.x * blockDim.x) {
        float4 v = x[i], g = dy[i];
        dx[i] = make_float4(gelu_b(v.x, g.x), gelu_b(v.y, g.y), gelu_b(v.z, g.z),
                            gelu_b(v.w, g.w));
    }
}
ELTWISE(gelu_bwd, (float *dx, const float *x, const float *dy, size_t n), (dx, x, dy, n),
        dx[i] = gelu_b(x[i], dy[i]))

void cu_gelu_forward(rumor_device_t *d, float *y, const float *x, size_t n)
{
    LAUNCH_4(d, gelu_fwd, "gelu_forward", n, aligned16(y) && aligned16(x),
             ((float4 *)y, (const float4 *)x, n4), (y + o, x + o, m));
}

void cu_gelu_backward(rumor_device_t *d, float *dx, const float *x, const float *dy, size_t n)
{
    LAUNCH_4(d, gelu_bwd, "gelu_backward", n, aligned16(dx) && aligned16(x) && aligned16(dy),
             ((float4 *)dx, (const float4 *)x, (const float4 *)dy, n4),
             (dx + o, x + o, dy + o, m));
}

/* inverted dropout with the counter-based mask of ops.h: element i is kept
 * when U(seed, i) >= p; backward draws the same mask */
static __global__ void dropout_kernel(float *y, const float *x, size_t n, float p, float keep,
                                      uint64_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] = cu_rand_uniform(seed, i) >= p ? x[i] * keep : 0.0f;
}

void cu_dropout_forward(rumor_device_t *d, float *y, const float *x, size_t n, float p,
                        uint64_t seed)
{
    float keep = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
    LAUNCH_N(d, dropout_kernel, "dropout", n, y, x, n, p, keep, seed);
}

void cu_dropout_backward(rumor_device_t *d, float *dx, const float *dy, size_t n, float p,
                         uint64_t seed)
{
    cu_dropout_forward(d, dx, dy, n, p, seed);
}
