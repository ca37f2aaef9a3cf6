// Package hnsw is the approximate vector ranking both in-process indexes use: vectors
// held as int8 codes with a scale each (codes.go: the quantisation and the dot product
// kernels, AVX2 where the CPU has it), a hierarchical navigable small world graph over
// such rows (graph.go: the build, its extension by rows written since, and a walk that
// applies the caller's filter as it goes), and a bounded best-k (TopK). Memory search
// (internal/searchindex) and the knowledge chunk index (knowledge/index) each keep their
// rows, decide when a space is large enough for a graph, build it off their lock and
// scan the rows written since exactly beside it. It is pure code: no I/O.
package hnsw
