// BFS and connected components over a CSR graph whose edge list is `Edges`: a plain
// pointer (GPU memory, or pinned host memory read zero-copy) or a bam::array<uint32_t>
// on the (simulated) SSDs. The offsets stay in GPU memory in every variant.
//
// The kernels are written the way the library advises for bam::array: one warp per
// vertex, lanes reading consecutive neighbours, so that the 32 lanes' reads fall into one
// or two cache lines and the array serves them with one lookup per line.
//
//   bfs_level_*   expands one BFS level: frontier -> next frontier (top-down)
//   bfs_bottom_up_* the same level bottom-up, for large frontiers (direction-optimizing)
//   cc_hook_*     one hooking sweep of connected components (Shiloach-Vishkin style:
//                 for an edge (v, u) with comp[u] < comp[v], comp[comp[v]] := min(., comp[u]))
//   cc_compress   pointer jumping: comp[v] := comp[comp[v]] until it is a root
#include <bam/array.cuh>

#include <stdint.h>

namespace {

constexpr uint32_t FULL = 0xffffffffu;
constexpr uint32_t UNSEEN = 0xffffffffu;

__device__ __forceinline__ uint64_t warp_id() { return (blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x) / 32; }
__device__ __forceinline__ uint64_t warps() { return static_cast<uint64_t>(gridDim.x) * blockDim.x / 32; }

/// Frontier vertices [0, nfront): each neighbour u not seen yet gets level + 1 (claimed
/// with a CAS, so it enters the next frontier once) and is appended to `next`.
template <typename Edges>
__device__ __forceinline__ void bfs_level(const uint64_t* offsets, Edges edges, uint32_t* level_of,
                                          const uint32_t* front, uint32_t nfront, uint32_t* next,
                                          uint32_t* next_count, uint32_t level) {
    const uint32_t lane = threadIdx.x & 31;
    for (uint64_t k = warp_id(); k < nfront; k += warps()) {
        const uint32_t v = front[k];
        const uint64_t lo = offsets[v], hi = offsets[v + 1];
        for (uint64_t base = lo; base < hi; base += 32) {  // warp-uniform bounds: full ballots
            const uint64_t j = base + lane;
            bool mine = false;
            uint32_t u = 0;
            if (j < hi) {
                u = edges[j];
                mine = level_of[u] == UNSEEN && atomicCAS(&level_of[u], UNSEEN, level + 1) == UNSEEN;
            }
            const uint32_t won = __ballot_sync(FULL, mine);
            if (won == 0) continue;
            uint32_t at = 0;
            if (lane == 0) at = atomicAdd(next_count, static_cast<uint32_t>(__popc(won)));
            at = __shfl_sync(FULL, at, 0);
            if (mine) next[at + __popc(won & ((1u << lane) - 1))] = u;
        }
    }
}

/// Bottom-up step of level `level` (direction-optimizing BFS, Beamer et al.): every
/// vertex not reached yet looks for a neighbour at `level` and stops at the first one;
/// found ones get level + 1 and join `next`. Used when the frontier is large: the edge
/// list is then read in vertex order, a few neighbours per vertex, instead of every
/// frontier vertex's whole list in frontier order. Only this warp writes vertex v.
template <typename Edges>
__device__ __forceinline__ void bfs_bottom_up(const uint64_t* offsets, Edges edges, uint32_t* level_of, uint32_t n,
                                              uint32_t* next, uint32_t* next_count, uint32_t level) {
    const uint32_t lane = threadIdx.x & 31;
    for (uint64_t v = warp_id(); v < n; v += warps()) {
        if (level_of[v] != UNSEEN) continue;  // warp-uniform: every lane reads the same word
        const uint64_t lo = offsets[v], hi = offsets[v + 1];
        bool found = false;
        for (uint64_t base = lo; base < hi && !found; base += 32) {
            const uint64_t j = base + lane;
            bool parent = false;
            if (j < hi) parent = level_of[edges[j]] == level;
            found = __any_sync(FULL, parent);
        }
        if (found && lane == 0) {
            level_of[v] = level + 1;
            next[atomicAdd(next_count, 1u)] = static_cast<uint32_t>(v);
        }
    }
}

/// One hooking sweep over every vertex: for each edge (v, u), the tree of the larger
/// label is hooked under the smaller one. Sets *changed when any label moved.
template <typename Edges>
__device__ __forceinline__ void cc_hook(const uint64_t* offsets, Edges edges, uint32_t n, uint32_t* comp,
                                        uint32_t* changed) {
    const uint32_t lane = threadIdx.x & 31;
    bool moved = false;
    for (uint64_t v = warp_id(); v < n; v += warps()) {
        const uint64_t lo = offsets[v], hi = offsets[v + 1];
        for (uint64_t base = lo; base < hi; base += 32) {
            const uint64_t j = base + lane;
            if (j >= hi) continue;
            const uint32_t u = edges[j];
            const uint32_t cv = comp[v], cu = comp[u];
            if (cu < cv) {
                moved |= atomicMin(&comp[cv], cu) > cu;
            } else if (cv < cu) {
                moved |= atomicMin(&comp[cu], cv) > cv;
            }
        }
    }
    if (__any_sync(FULL, moved) && lane == 0) atomicOr(changed, 1u);
}

}  // namespace

#define GRAPH_KERNELS(NAME, EDGES)                                                                               \
    /* One BFS level, both directions with one parameter list (the host picks by name): */      \
    /* top-down reads front[0, nfront), bottom-up every vertex of n.                       */      \
    extern "C" __global__ void bfs_level_##NAME(const uint64_t* offsets, EDGES edges, uint32_t* level_of,      \
                                                uint32_t n, const uint32_t* front, uint32_t nfront,            \
                                                uint32_t* next, uint32_t* next_count, uint32_t level) {        \
        bfs_level(offsets, edges, level_of, front, nfront, next, next_count, level);                          \
    }                                                                                                           \
    extern "C" __global__ void bfs_bottom_up_##NAME(const uint64_t* offsets, EDGES edges, uint32_t* level_of,  \
                                                    uint32_t n, const uint32_t*, uint32_t, uint32_t* next,      \
                                                    uint32_t* next_count, uint32_t level) {                    \
        bfs_bottom_up(offsets, edges, level_of, n, next, next_count, level);                                  \
    }                                                                                                           \
    extern "C" __global__ void cc_hook_##NAME(const uint64_t* offsets, EDGES edges, uint32_t n, uint32_t* comp, \
                                              uint32_t* changed) {                                            \
        cc_hook(offsets, edges, n, comp, changed);                                                            \
    }

GRAPH_KERNELS(plain, const uint32_t*)
GRAPH_KERNELS(bam, bam::array<uint32_t>)

/// comp[v] := the root of v's tree (pointer jumping; the trees have no cycles since a
/// label only ever moves to a smaller one).
extern "C" __global__ void cc_compress(uint32_t* comp, uint32_t n) {
    for (uint64_t v = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; v < n;
         v += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
        uint32_t c = comp[v];
        while (comp[c] != c) c = comp[c];
        comp[v] = c;
    }
}

/// comp[v] = v.
extern "C" __global__ void cc_init(uint32_t* comp, uint32_t n) {
    for (uint64_t v = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; v < n;
         v += static_cast<uint64_t>(gridDim.x) * blockDim.x)
        comp[v] = static_cast<uint32_t>(v);
}
