module github.com/topofit/topofit/bench/peer-gpuallocator

go 1.22

require github.com/NVIDIA/go-gpuallocator v0.6.0

require (
	github.com/NVIDIA/go-nvlib v0.7.3 // indirect
	github.com/NVIDIA/go-nvml v0.12.9-0 // indirect
	github.com/google/uuid v1.6.0 // indirect
)
