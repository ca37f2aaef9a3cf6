package hnsw

import "golang.org/x/sys/cpu"

// hasAVX2 selects the SIMD kernel; every x86-64 server of the last decade has it.
var hasAVX2 = cpu.X86.HasAVX2

//go:noescape
func dotInt8AVX2(a, b []int8) int32

func dotInt8(a, b []int8) int32 {
	if hasAVX2 {
		return dotInt8AVX2(a, b)
	}
	return dotInt8Go(a, b)
}
