"""Matrix-vector products on GGUF's 4-bit (Q4_1) and 8-bit (Q8_0) blocks with AVX512-VNNI integer dot products,
and a whole Llama decoder layer for one sequence on them, for the decoding step of
`clawgym.serve.fast_decode` (`--precision q4`) when it decodes one or a few rows.

Why: torch's CPU int4 kernel (`_weight_int4pack_mm_for_cpu`) unpacks every 4-bit weight to a float and
multiplies in floats, and a SmolLM2-135M step around it is about 1,300 small torch dispatches (norms,
rotary, attention, the cache) that cost a third of the step. llama.cpp instead rounds the vector to 8 bits per
block of 32 and multiplies bytes (64 products per `vpdpbusd` instruction), with a layer's small operations in
plain loops; this does the same:

    y[n] = sum_g d[n,g] * dx[g] * dot(q[n,g,:], xq[g,:])  +  sum_g m[n,g] * t[g]

with the blocks' weights `d*q + m` (Q4_1: q in 0..15, d and m fp16 as in the file) and the vector's blocks
`dx * xq` (xq in -127..127, rounded to nearest), t[g] = dx[g] * sum(xq[g,:]) (the rounding of both sums then
cancels: m is about -8d). Q8_0 (m = 0, q in -127..127) is stored as q + 128 (vpdpbusd multiplies unsigned by
signed bytes) and the second sum takes the 128 back: it is `d . (-128 t)`. The weights are the GGUF's
exactly; the vector's 8-bit rounding is the one difference from the fp32 product (llama.cpp's too).
`cg_layer` is one decoder layer (RMS norms, q/k/v, rotary, grouped-query attention over the cache, whose new
position it writes, o, SiLU MLP) in fp32 around those products.

The C source below is compiled once per source version with the system's C compiler into the cache
(`~/.cache/clawgym/kernels/`, or `$CLAWGYM_CACHE/kernels/`; about a second) and loaded with ctypes: no build
step at install time. :func:`load` returns None (with the reason in :data:`UNAVAILABLE`) where there is no
compiler, the CPU lacks AVX512-VNNI, or `CLAWGYM_Q4_KERNEL=0`; the step then uses torch's int4 kernel. The
kernel splits each product's rows between the calling thread and workers of its own (`cg_threads`: the step sets
torch's thread count, or `CLAWGYM_Q4_KERNEL_THREADS`), which spin a little while between products and then
sleep; a worker that is not running delays only the chunk of rows it took.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import torch

GROUP = 32

_SOURCE = r"""
#include <immintrin.h>
#include <stdint.h>

int cg_cpu_ok(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")
        && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni")
        && __builtin_cpu_supports("f16c");
}

/* x (K floats, K % 64 == 0) -> xq (int8, blocks of 32), xs (G: dx * the sum of the block's xq, times `tail`),
   dx16 (per pair of blocks: 8 copies of each block's scale dx, the lanes of one vpdpbusd result) */
static void quantize(const float *x, int K, float tail, int8_t *xq, float *xs, float *dx16) {
    int G = K / 32;
    for (int g = 0; g < G; g++) {
        __m512 a = _mm512_loadu_ps(x + 32 * g), b = _mm512_loadu_ps(x + 32 * g + 16);
        float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(a), _mm512_abs_ps(b)));
        float d = amax / 127.0f, id = amax > 0 ? 127.0f / amax : 0.0f;
        __m512i ia = _mm512_cvtps_epi32(_mm512_mul_ps(a, _mm512_set1_ps(id)));
        __m512i ib = _mm512_cvtps_epi32(_mm512_mul_ps(b, _mm512_set1_ps(id)));
        _mm_storeu_si128((__m128i *)(xq + 32 * g), _mm512_cvtsepi32_epi8(ia));
        _mm_storeu_si128((__m128i *)(xq + 32 * g + 16), _mm512_cvtsepi32_epi8(ib));
        xs[g] = tail * d * (float)_mm512_reduce_add_epi32(_mm512_add_epi32(ia, ib));
        _mm256_storeu_ps(dx16 + 8 * g, _mm256_set1_ps(d));
    }
}

static inline __m512 pair_scales(const uint16_t *d) {  /* fp16 d[0], d[1] -> lanes 0-7: d[0], 8-15: d[1] */
    __m128 v = _mm_cvtph_ps(_mm_cvtsi32_si128(*(const int *)d));
    return _mm512_permutexvar_ps(_mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0),
                                 _mm512_castps128_ps512(v));
}

static inline __m512 tail_terms(const uint16_t *m, const float *t, int G, __m512 acc) {  /* + m . t (m fp16) */
    for (int g = 0; g < G; g += 16) {
        __mmask16 k = G - g >= 16 ? 0xFFFF : (__mmask16)((1u << (G - g)) - 1);
        acc = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, m + g)), _mm512_maskz_loadu_ps(k, t + g),
                              acc);
    }
    return acc;
}

/* y (M x N) = x (M x K) @ W.T, rows n0..n1 of W, W in blocks of 32 with fp16 scales d (N x G):
   kind 4 = Q4_1, weights d*q + m (m: N x G fp16; w: N x G/2 x 32 bytes, byte j of a pair of blocks holding
   weight j of the first block in its low nibble and of the second in its high nibble);
   kind 8 = Q8_0, weights d*q (w: N x G x 32 bytes, q + 128). */
/* rows n0..n1 of y (M x N) = x @ W.T, x already rounded by `quantize` (xq, xs, dx16 of each of its M rows) */
static void gemv_rows(int kind, const int8_t *xq, const float *xs, const float *dx16, int M, int K,
                      const uint8_t *w, const uint16_t *d, const uint16_t *m, float *y, int N, int n0, int n1) {
    int G = K / 32;
    const __m512i low = _mm512_set1_epi8(0x0F);
    for (int n = n0; n < n1; n++) {
        const uint16_t *dn = d + (long)n * G, *mn = (kind == 4 ? m : d) + (long)n * G;
        for (int r = 0; r < M; r++) {
            const int8_t *xr = xq + r * K;
            const float *sr = dx16 + r * G * 8;
            __m512 acc = _mm512_setzero_ps();
            for (int p = 0; p < G / 2; p++) {
                __m512i v;
                if (kind == 4) {
                    v = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(w + ((long)n * G + 2 * p) * 16)));
                    v = _mm512_inserti64x4(v, _mm256_srli_epi16(_mm512_castsi512_si256(v), 4), 1);
                    v = _mm512_and_si512(v, low);
                } else {
                    v = _mm512_loadu_si512((const void *)(w + ((long)n * G + 2 * p) * 32));
                }
                __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), v,
                                                _mm512_loadu_si512((const void *)(xr + 64 * p)));
                acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s),
                                      _mm512_mul_ps(pair_scales(dn + 2 * p), _mm512_loadu_ps(sr + 16 * p)), acc);
            }
            y[(long)r * N + n] = _mm512_reduce_add_ps(tail_terms(mn, xs + r * G, G, acc));
        }
    }
}

/* The rows of a product split between the calling thread and cg_threads-1 workers of our own, which spin a
   few milliseconds between products (a decoding step is a hundred products in a row), then sleep. */
#include <pthread.h>
#include <stdatomic.h>

typedef struct {
    int kind, M, K, N, chunks;
    const int8_t *xq; const float *xs, *dx16; const uint8_t *w; const uint16_t *d, *m; float *y;
} cg_job;
static cg_job job;
static int threads = 1, started = 0;
static atomic_uint gen;                  /* the current product's number (workers wake when it changes) */
static _Atomic unsigned long long ticket; /* (product number << 32) | its next chunk */
static atomic_int chunks_done;
static pthread_mutex_t jobs = PTHREAD_MUTEX_INITIALIZER, mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

/* Take chunks of product number g until none is left: the caller takes them too, so a worker that is not
   running (a busy machine) delays nothing but the chunk it took. A chunk is only taken while g is the current
   product (`ticket`), so a worker late for a product that is over takes nothing of the next. */
static void take_chunks(const cg_job *jb, unsigned g) {
    for (;;) {
        unsigned long long t = atomic_load(&ticket);
        if ((unsigned)(t >> 32) != g || (int)(t & 0xFFFFFFFFu) >= jb->chunks) return;
        if (!atomic_compare_exchange_weak(&ticket, &t, t + 1)) continue;
        int c = (int)(t & 0xFFFFFFFFu);
        int n0 = (int)((long)jb->N * c / jb->chunks), n1 = (int)((long)jb->N * (c + 1) / jb->chunks);
        gemv_rows(jb->kind, jb->xq, jb->xs, jb->dx16, jb->M, jb->K, jb->w, jb->d, jb->m, jb->y, jb->N, n0, n1);
        atomic_fetch_add_explicit(&chunks_done, 1, memory_order_release);
    }
}

static void *worker(void *arg) {
    (void)arg;
    unsigned seen = atomic_load(&gen);
    for (;;) {
        for (long spins = 0; atomic_load_explicit(&gen, memory_order_acquire) == seen; spins++) {
            if (spins < 20000) { _mm_pause(); continue; }
            pthread_mutex_lock(&mu);
            while (atomic_load(&gen) == seen) pthread_cond_wait(&cv, &mu);
            pthread_mutex_unlock(&mu);
        }
        seen = atomic_load_explicit(&gen, memory_order_acquire);
        cg_job jb = job;  /* product `seen`'s, unless it is over already: then take_chunks takes nothing */
        take_chunks(&jb, seen);
    }
    return 0;
}

static void forked_child(void) {  /* a fork has only the forking thread: start again without workers */
    started = 0; threads = 1;
    pthread_mutex_init(&jobs, 0); pthread_mutex_init(&mu, 0); pthread_cond_init(&cv, 0);
}

/* Use n threads (the caller's and n-1 workers) for the next products. */
void cg_threads(int n) {
    static int registered = 0;
    pthread_mutex_lock(&jobs);
    if (!registered) { pthread_atfork(0, 0, forked_child); registered = 1; }
    n = n < 1 ? 1 : n > 64 ? 64 : n;
    while (started < n - 1) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &attr, worker, (void *)(long)(started + 1))) { pthread_attr_destroy(&attr); break; }
        pthread_attr_destroy(&attr);
        started++;
    }
    threads = n - 1 <= started ? n : started + 1;
    pthread_mutex_unlock(&jobs);
}

/* y (M x N) = x (M x K) @ W.T, W in blocks (see gemv_rows), on cg_threads' threads. */
void cg_gemv(int kind, const float *x, int M, int K, const uint8_t *w, const uint16_t *d, const uint16_t *m,
             float *y, int N) {
    int G = K / 32;
    int8_t xq[M * K];
    float xs[M * G], dx16[M * G * 8];
    for (int r = 0; r < M; r++)
        quantize(x + (long)r * K, K, kind == 4 ? 1.0f : -128.0f, xq + r * K, xs + r * G, dx16 + r * G * 8);
    pthread_mutex_lock(&jobs);
    int chunks = N / 64 < 4 * threads ? N / 64 : 4 * threads;
    if (threads == 1 || chunks < 2) {
        gemv_rows(kind, xq, xs, dx16, M, K, w, d, m, y, N, 0, N);
        pthread_mutex_unlock(&jobs);
        return;
    }
    job = (cg_job){kind, M, K, N, chunks, xq, xs, dx16, w, d, m, y};
    unsigned g = atomic_load(&gen) + 1;
    atomic_store(&chunks_done, 0);
    atomic_store(&ticket, (unsigned long long)g << 32);
    pthread_mutex_lock(&mu);
    atomic_store_explicit(&gen, g, memory_order_release);
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    take_chunks(&job, g);
    while (atomic_load_explicit(&chunks_done, memory_order_acquire) < chunks) _mm_pause();
    pthread_mutex_unlock(&jobs);
}

#include <math.h>

static inline float dot(const float *a, const float *b, int n) {  /* n % 16 == 0 */
    __m512 acc = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc);
    return _mm512_reduce_add_ps(acc);
}

static void rms(const float *x, const float *w, float eps, int n, float *out) {  /* as LlamaRMSNorm */
    float r = 1.0f / sqrtf(dot(x, x, n) / n + eps);
    for (int i = 0; i < n; i++) out[i] = w[i] * (x[i] * r);
}

static void rope(float *x, const float *cos, const float *sin, int heads, int hd) {  /* rotate_half */
    int half = hd / 2;
    for (int h = 0; h < heads; h++, x += hd)
        for (int i = 0; i < half; i++) {
            float a = x[i], b = x[i + half];
            x[i] = a * cos[i] - b * sin[i];
            x[i + half] = b * cos[i + half] + a * sin[i + half];
        }
}

typedef struct { int kind, n, k; const uint8_t *w; const uint16_t *d, *m; } cg_matrix;

static void mv(const cg_matrix *a, const float *x, float *y) { cg_gemv(a->kind, x, 1, a->k, a->w, a->d, a->m, y, a->n); }

/* One decoder layer of a Llama model for one sequence, in place on the hidden state h. mats: qkv, o, gate_up,
   down. kc/vc: this layer's key/value cache of this sequence (heads `hstride` floats apart, positions hd apart),
   whose position `pos` gets this token's key and value; attention is over positions 0..pos. */
void cg_layer(float *h, int hidden, int inter, int nh, int nkv, int hd, float eps, float scale,
              const float *ln1, const float *ln2, const cg_matrix *mats, const float *cos, const float *sin,
              float *kc, float *vc, long hstride, int pos) {
    int qn = nh * hd, kn = nkv * hd, group = nh / nkv;
    float x[hidden], y[hidden], qkv[qn + 2 * kn], att[qn], gu[2 * inter], sc[pos + 1];
    rms(h, ln1, eps, hidden, x);
    mv(&mats[0], x, qkv);
    rope(qkv, cos, sin, nh + nkv, hd);
    for (int j = 0; j < nkv; j++) {
        for (int i = 0; i < hd; i++) {
            kc[j * hstride + (long)pos * hd + i] = qkv[qn + j * hd + i];
            vc[j * hstride + (long)pos * hd + i] = qkv[qn + kn + j * hd + i];
        }
    }
    for (int hq = 0; hq < nh; hq++) {
        const float *q = qkv + hq * hd, *kh = kc + (hq / group) * hstride, *vh = vc + (hq / group) * hstride;
        float mx = -INFINITY, sum = 0.0f;
        for (int t = 0; t <= pos; t++) { sc[t] = dot(q, kh + (long)t * hd, hd) * scale; if (sc[t] > mx) mx = sc[t]; }
        for (int t = 0; t <= pos; t++) { sc[t] = expf(sc[t] - mx); sum += sc[t]; }
        __m512 o[hd / 16];
        for (int i = 0; i < hd / 16; i++) o[i] = _mm512_setzero_ps();
        for (int t = 0; t <= pos; t++) {
            __m512 p = _mm512_set1_ps(sc[t] / sum);
            for (int i = 0; i < hd / 16; i++) o[i] = _mm512_fmadd_ps(p, _mm512_loadu_ps(vh + (long)t * hd + 16 * i), o[i]);
        }
        for (int i = 0; i < hd / 16; i++) _mm512_storeu_ps(att + hq * hd + 16 * i, o[i]);
    }
    mv(&mats[1], att, y);
    for (int i = 0; i < hidden; i++) h[i] += y[i];
    rms(h, ln2, eps, hidden, x);
    mv(&mats[2], x, gu);
    for (int i = 0; i < inter; i++) { float g = gu[i]; gu[i] = g / (1.0f + expf(-g)) * gu[inter + i]; }
    mv(&mats[3], gu, y);
    for (int i = 0; i < hidden; i++) h[i] += y[i];
}
"""

_FLAGS = ["-O3", "-shared", "-fPIC", "-pthread", "-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512vnni", "-mfma", "-mf16c"]
_lock = threading.Lock()
_lib: ctypes.CDLL | None = None
UNAVAILABLE: str | None = None  # why `load` returned None, once it has


def _cache_dir() -> Path:
    base = os.environ.get("CLAWGYM_CACHE")
    return (Path(base) if base else Path.home() / ".cache" / "clawgym") / "kernels"


def load() -> ctypes.CDLL | None:
    """The compiled kernel (built on first use), or None with the reason in :data:`UNAVAILABLE`."""
    global _lib, UNAVAILABLE
    if os.environ.get("CLAWGYM_Q4_KERNEL", "1") == "0":
        return None
    with _lock:
        if _lib is not None or UNAVAILABLE is not None:
            return _lib
        try:
            _lib = _build()
        except Exception as exc:  # noqa: BLE001 (any failure means: use torch's kernel, and say why)
            UNAVAILABLE = f"{type(exc).__name__}: {exc}"
        return _lib


def _build() -> ctypes.CDLL:
    if os.uname().machine not in ("x86_64", "AMD64"):
        raise RuntimeError(f"an x86-64 kernel; this CPU is {os.uname().machine}")
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        raise RuntimeError("no C compiler (cc or gcc) to build it")
    tag = hashlib.sha256((_SOURCE + " ".join(_FLAGS)).encode()).hexdigest()[:16]
    path = _cache_dir() / f"q4_gemv_{tag}.so"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
            src = Path(tmp) / "q4_gemv.c"
            src.write_text(_SOURCE)
            out = Path(tmp) / path.name
            proc = subprocess.run([cc, *_FLAGS, str(src), "-o", str(out), "-lm"], capture_output=True, text=True,
                                  timeout=300)
            if proc.returncode:
                raise RuntimeError(f"{cc} failed: {proc.stderr.strip()[-500:]}")
            os.replace(out, path)  # atomic: a concurrent build of the same source writes the same file
    lib = ctypes.CDLL(str(path))
    lib.cg_cpu_ok.restype = ctypes.c_int
    if not lib.cg_cpu_ok():
        raise RuntimeError("this CPU lacks AVX512-VNNI")
    lib.cg_gemv.restype = None
    lib.cg_gemv.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
    lib.cg_threads.restype = None
    lib.cg_threads.argtypes = [ctypes.c_int]
    lib.cg_layer.restype = None
    lib.cg_layer.argtypes = [ctypes.c_void_p, *[ctypes.c_int] * 5, ctypes.c_float, ctypes.c_float,
                             *[ctypes.c_void_p] * 7, ctypes.c_long, ctypes.c_int]
    return lib


class _Matrix(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int), ("n", ctypes.c_int), ("k", ctypes.c_int), ("w", ctypes.c_void_p),
                ("d", ctypes.c_void_p), ("m", ctypes.c_void_p)]


class Layer:
    """One Llama decoder layer computed by `cg_layer` (see the C source) for one sequence: the matrices q/k/v
    (fused), o, gate/up (fused) and down as :class:`BlockMatrix`, the norms' weights in fp32."""

    def __init__(self, lib: ctypes.CDLL, mats: list[BlockMatrix], ln1: torch.Tensor, ln2: torch.Tensor,
                 dims: tuple[int, int, int, int, int], eps: float, scale: float):
        self.lib, self.mats = lib, mats  # kept: the structs point into their tensors
        self.ln1, self.ln2 = ln1.detach().float().contiguous(), ln2.detach().float().contiguous()
        self.structs = (_Matrix * 4)(*[_Matrix(m.kind, m.n, m.k, *m._args) for m in mats])
        self.head = (*dims, ctypes.c_float(eps), ctypes.c_float(scale), self.ln1.data_ptr(), self.ln2.data_ptr(),
                     ctypes.addressof(self.structs))

    def __call__(self, h: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, keys: torch.Tensor,
                 values: torch.Tensor, pos: int) -> None:
        """`h` (hidden,) fp32, updated in place; `cos`/`sin` (head_dim,) this position's rotary tables; `keys`/
        `values` (1, kv heads, > pos, head_dim) fp32 views whose position `pos` is this token's, written here."""
        self.lib.cg_layer(h.data_ptr(), *self.head, cos.data_ptr(), sin.data_ptr(), keys.data_ptr(),
                          values.data_ptr(), keys.stride(1), pos)


class BlockMatrix:
    """A weight matrix (N, K) in this kernel's block layout: `x @ W.T` for a few rows of `x`, in float32."""

    def __init__(self, lib: ctypes.CDLL, kind: int, w: torch.Tensor, d: torch.Tensor, m: torch.Tensor, n: int,
                 k: int):
        self.lib, self.kind, self.w, self.d, self.m, self.n, self.k = lib, kind, w, d, m, n, k
        self._args = (w.data_ptr(), d.data_ptr(), m.data_ptr())

    def __call__(self, x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        rows = x.reshape(-1, self.k)
        if rows.dtype != torch.float32 or not rows.is_contiguous():
            rows = rows.float().contiguous()
        y = out if out is not None else torch.empty((rows.shape[0], self.n), dtype=torch.float32)
        w, d, m = self._args
        self.lib.cg_gemv(self.kind, rows.data_ptr(), rows.shape[0], self.k, w, d, m, y.data_ptr(), self.n)
        return y.view(*x.shape[:-1], self.n)


def q4_1(lib: ctypes.CDLL, q: torch.Tensor, d: torch.Tensor, m: torch.Tensor) -> BlockMatrix | None:
    """A Q4_1 matrix: `q` (N, G, 32) in 0..15, `d`, `m` (N, G) fp16 values: weights `d*q + m`. None if G is
    odd."""
    n, g, _ = q.shape
    if g % 2:
        return None
    pairs = q.to(torch.uint8).reshape(n, g // 2, 2, GROUP)
    packed = (pairs[:, :, 0] | (pairs[:, :, 1] << 4)).contiguous()  # (N, G/2, 32)
    return BlockMatrix(lib, 4, packed, d.half().contiguous(), m.half().contiguous(), n, g * GROUP)


def q8_0(lib: ctypes.CDLL, q: torch.Tensor, d: torch.Tensor) -> BlockMatrix | None:
    """A Q8_0 matrix: `q` (N, G, 32) in -127..127, `d` (N, G) fp16 values: weights `d*q`. None if G is odd."""
    n, g, _ = q.shape
    if g % 2:
        return None
    packed = (q.to(torch.int16) + 128).to(torch.uint8).contiguous()  # unsigned for vpdpbusd, see the module
    dh = d.half().contiguous()
    return BlockMatrix(lib, 8, packed, dh, dh, n, g * GROUP)
