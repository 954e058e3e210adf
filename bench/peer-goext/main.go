// Command peer-goext is the Go baseline topofit's extender is measured against: a
// kube-scheduler HTTP extender written the common Go way (net/http, encoding/json decoding
// into the real k8s.io/kube-scheduler/extender/v1 and k8s.io/api/core/v1 types) that does
// the least any GPU extender must do: compare each node's nvidia.com/gpu with the pod's
// request.  It keeps no cluster state, so its cost is request handling alone: decode, a
// loop over the nodes, encode.
//
// Nodes arrive whole (nodeCacheCapable: false) or as names (true); a name-only node is
// taken to have -gpus-per-node GPUs.  Serves /filter, /prioritize and /healthz on
// 127.0.0.1:-port.  Used by microbench/ext-bench.c (TOPOFIT_BENCH_PEER) and by the end-to-end
// suite's control-plane check (test/e2e), built by scripts/e2e-build.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"

	corev1 "k8s.io/api/core/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

const gpuResource corev1.ResourceName = "nvidia.com/gpu"

// maxBody bounds a request body, as any extender facing the network should.
const maxBody = 64 << 20

type peer struct {
	gpusPerNode int64
}

// podGPUs is what the pod asks for: the sum over its containers (limit, else request),
// or the largest init container's when that is more, as the scheduler counts it.
func podGPUs(pod *corev1.Pod) int64 {
	if pod == nil {
		return 0
	}
	one := func(r corev1.ResourceRequirements) int64 {
		if q, ok := r.Limits[gpuResource]; ok {
			return q.Value()
		}
		if q, ok := r.Requests[gpuResource]; ok {
			return q.Value()
		}
		return 0
	}
	var sum, initMax int64
	for i := range pod.Spec.Containers {
		sum += one(pod.Spec.Containers[i].Resources)
	}
	for i := range pod.Spec.InitContainers {
		if v := one(pod.Spec.InitContainers[i].Resources); v > initMax {
			initMax = v
		}
	}
	return max(sum, initMax)
}

// nodeGPUs is a whole node's allocatable GPUs, or the configured default for a bare name.
func (p *peer) nodeGPUs(node *corev1.Node) int64 {
	if node == nil {
		return p.gpusPerNode
	}
	q, ok := node.Status.Allocatable[gpuResource]
	if !ok {
		return 0
	}
	return q.Value()
}

// decode reads ExtenderArgs, answering 400 itself when the body is not one.
func decode(w http.ResponseWriter, r *http.Request) (*extenderv1.ExtenderArgs, bool) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return nil, false
	}
	var args extenderv1.ExtenderArgs
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody)).Decode(&args); err != nil {
		http.Error(w, "bad ExtenderArgs: "+err.Error(), http.StatusBadRequest)
		return nil, false
	}
	return &args, true
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(v); err != nil {
		log.Printf("peer-goext: writing the answer: %v", err)
	}
}

func (p *peer) filter(w http.ResponseWriter, r *http.Request) {
	args, ok := decode(w, r)
	if !ok {
		return
	}
	want := podGPUs(args.Pod)
	res := extenderv1.ExtenderFilterResult{FailedNodes: extenderv1.FailedNodesMap{}}
	short := func(have int64) string {
		return fmt.Sprintf("node has %d %s, pod asks for %d", have, gpuResource, want)
	}
	switch {
	case args.Nodes != nil:
		kept := &corev1.NodeList{Items: make([]corev1.Node, 0, len(args.Nodes.Items))}
		for i := range args.Nodes.Items {
			n := &args.Nodes.Items[i]
			if have := p.nodeGPUs(n); have >= want {
				kept.Items = append(kept.Items, *n)
			} else {
				res.FailedNodes[n.Name] = short(have)
			}
		}
		res.Nodes = kept
	case args.NodeNames != nil:
		kept := make([]string, 0, len(*args.NodeNames))
		for _, name := range *args.NodeNames {
			if have := p.nodeGPUs(nil); have >= want {
				kept = append(kept, name)
			} else {
				res.FailedNodes[name] = short(have)
			}
		}
		res.NodeNames = &kept
	}
	reply(w, &res)
}

func (p *peer) prioritize(w http.ResponseWriter, r *http.Request) {
	args, ok := decode(w, r)
	if !ok {
		return
	}
	score := func(have int64) int64 {
		return min(have, extenderv1.MaxExtenderPriority)
	}
	var out extenderv1.HostPriorityList
	switch {
	case args.Nodes != nil:
		out = make(extenderv1.HostPriorityList, 0, len(args.Nodes.Items))
		for i := range args.Nodes.Items {
			n := &args.Nodes.Items[i]
			out = append(out, extenderv1.HostPriority{Host: n.Name, Score: score(p.nodeGPUs(n))})
		}
	case args.NodeNames != nil:
		out = make(extenderv1.HostPriorityList, 0, len(*args.NodeNames))
		for _, name := range *args.NodeNames {
			out = append(out, extenderv1.HostPriority{Host: name, Score: score(p.nodeGPUs(nil))})
		}
	}
	reply(w, &out)
}

func main() {
	port := flag.Int("port", 12346, "TCP port to listen on, on 127.0.0.1")
	gpus := flag.Int64("gpus-per-node", 8, "GPUs assumed for a node sent by name only")
	flag.Parse()
	if *gpus < 0 {
		fmt.Fprintln(os.Stderr, "peer-goext: -gpus-per-node must not be negative")
		os.Exit(2)
	}
	p := &peer{gpusPerNode: *gpus}
	mux := http.NewServeMux()
	mux.HandleFunc("/filter", p.filter)
	mux.HandleFunc("/prioritize", p.prioritize)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok"))
	})
	addr := net.JoinHostPort("127.0.0.1", fmt.Sprint(*port))
	log.Fatal(http.ListenAndServe(addr, mux))
}
