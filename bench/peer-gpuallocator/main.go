// SPDX-License-Identifier: Apache-2.0
//
// peer-gpuallocator: NVIDIA's own best-effort GPU picker (github.com/NVIDIA/go-gpuallocator,
// gpuallocator.NewBestEffortPolicy, the code behind the k8s device plugin's
// GetPreferredAllocation) run on topologies that topofit's C side describes, so that
// bench's k8s-besteffort re-implementation can be compared with it choice by choice.
//
// Input on stdin, one directive a line ('#' starts a comment):
//
//	gpus N                    starts a topology of N GPUs (indices 0..N-1), no links yet
//	link I J TYPE[,TYPE...]   the links between GPU I and GPU J (both directions), by the
//	                          module's P2PLinkType names: P2PLinkCrossCPU, P2PLinkSameCPU,
//	                          P2PLinkHostBridge, P2PLinkMultiSwitch, P2PLinkSingleSwitch,
//	                          P2PLinkSameBoard, SingleNVLINKLink, TwoNVLINKLinks, ...
//	                          EighteenNVLINKLinks
//	query FREE COUNT          FREE: comma-separated free GPU indices ("-" for none)
//
// Output: one line per query, in order: "pick " and the chosen indices in the order the
// policy returned them, comma-separated; "-" when it returned none; a padding slot (a nil
// Device) prints as "nil".
//
// No NVML: gpuallocator.Device is built directly.  Its exported fields are all the policy
// reads (Index, and Links keyed by the peer's Index); the embedded nvlibDevice (NVML
// handle, UUID, PCI bus id) stays zero because BestEffortPolicy never touches it.  The link
// type, links.P2PLinkType, lives in the module's internal package and cannot be named
// here, so the table below holds one P2PLink per type built from untyped constants (the
// iota order of internal/links/device.go); main checks every entry against the type's own
// String() at start, so a reordered enum in another version fails loudly instead of
// scoring wrongly.
package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-gpuallocator/gpuallocator"
)

// linkTypes[i] carries P2PLinkType i; linkNames[i] is what its String() must return.
var linkTypes = []gpuallocator.P2PLink{
	{Type: 0}, {Type: 1}, {Type: 2}, {Type: 3}, {Type: 4}, {Type: 5}, {Type: 6}, {Type: 7},
	{Type: 8}, {Type: 9}, {Type: 10}, {Type: 11}, {Type: 12}, {Type: 13}, {Type: 14},
	{Type: 15}, {Type: 16}, {Type: 17}, {Type: 18}, {Type: 19}, {Type: 20}, {Type: 21},
	{Type: 22}, {Type: 23}, {Type: 24},
}

var linkNames = []string{
	"", // P2PLinkUnknown: never given; NewDevices leaves unknown links out
	"P2PLinkCrossCPU", "P2PLinkSameCPU", "P2PLinkHostBridge", "P2PLinkMultiSwitch",
	"P2PLinkSingleSwitch", "P2PLinkSameBoard", "SingleNVLINKLink", "TwoNVLINKLinks",
	"ThreeNVLINKLinks", "FourNVLINKLinks", "FiveNVLINKLinks", "SixNVLINKLinks",
	"SevenNVLINKLinks", "EightNVLINKLinks", "NineNVLINKLinks", "TenNVLINKLinks",
	"ElevenNVLINKLinks", "TwelveNVLINKLinks", "ThirteenNVLINKLinks", "FourteenNVLINKLinks",
	"FifteenNVLINKLinks", "SixteenNVLINKLinks", "SeventeenNVLINKLinks", "EighteenNVLINKLinks",
}

const maxGPUs = 64 // topofit's TOPO_MAX_GPUS is larger; the policy is exponential anyway

func linkByName(name string) (gpuallocator.P2PLink, bool) {
	for i := 1; i < len(linkNames); i++ {
		if linkNames[i] == name {
			return linkTypes[i], true
		}
	}
	return gpuallocator.P2PLink{}, false
}

func parseIndex(s string, n int) (int, error) {
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 || v >= n {
		return 0, fmt.Errorf("bad GPU index %q (topology has %d)", s, n)
	}
	return v, nil
}

func run() error {
	for i := 1; i < len(linkTypes); i++ {
		if got := linkTypes[i].Type.String(); got != linkNames[i] {
			return fmt.Errorf("P2PLinkType %d is %q in this go-gpuallocator, expected %q", i, got, linkNames[i])
		}
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 64<<10), 1<<20)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	policy := gpuallocator.NewBestEffortPolicy()
	var devices []*gpuallocator.Device
	for lineno := 1; in.Scan(); lineno++ {
		line := in.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		bad := func(format string, a ...any) error {
			return fmt.Errorf("stdin:%d: %s", lineno, fmt.Sprintf(format, a...))
		}
		switch {
		case f[0] == "gpus" && len(f) == 2:
			n, err := strconv.Atoi(f[1])
			if err != nil || n < 1 || n > maxGPUs {
				return bad("gpus takes 1..%d", maxGPUs)
			}
			devices = make([]*gpuallocator.Device, n)
			for i := range devices {
				devices[i] = &gpuallocator.Device{Index: i, Links: map[int][]gpuallocator.P2PLink{}}
			}
		case f[0] == "link" && len(f) == 4 && devices != nil:
			a, err := parseIndex(f[1], len(devices))
			if err != nil {
				return bad("%v", err)
			}
			b, err := parseIndex(f[2], len(devices))
			if err != nil || a == b {
				return bad("bad second GPU %q", f[2])
			}
			for _, name := range strings.Split(f[3], ",") {
				l, ok := linkByName(name)
				if !ok {
					return bad("unknown link type %q", name)
				}
				ab, ba := l, l
				ab.GPU, ba.GPU = devices[b], devices[a]
				devices[a].Links[b] = append(devices[a].Links[b], ab)
				devices[b].Links[a] = append(devices[b].Links[a], ba)
			}
		case f[0] == "query" && len(f) == 3 && devices != nil:
			var avail []*gpuallocator.Device
			if f[1] != "-" {
				for _, s := range strings.Split(f[1], ",") {
					i, err := parseIndex(s, len(devices))
					if err != nil {
						return bad("%v", err)
					}
					avail = append(avail, devices[i])
				}
			}
			size, err := strconv.Atoi(f[2])
			if err != nil {
				return bad("bad count %q", f[2])
			}
			picked := policy.Allocate(avail, nil, size)
			words := make([]string, 0, len(picked))
			for _, d := range picked {
				if d == nil {
					words = append(words, "nil")
				} else {
					words = append(words, strconv.Itoa(d.Index))
				}
			}
			if len(words) == 0 {
				words = append(words, "-")
			}
			fmt.Fprintf(out, "pick %s\n", strings.Join(words, ","))
		default:
			return bad("expected 'gpus N', 'link I J TYPES' or 'query FREE COUNT'")
		}
	}
	return in.Err()
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "peer-gpuallocator: %v\n", err)
		os.Exit(1)
	}
}
