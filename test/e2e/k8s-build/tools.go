//go:build tools

// Package tools pins what scripts/e2e-build builds for the end-to-end suite: the
// Kubernetes control plane and kubelet of the k8s.io/kubernetes release in go.mod, and the
// etcd server that release is tested with (its go.mod's go.etcd.io/etcd/server/v3).  The
// build tag keeps the package out of every ordinary build; `go mod tidy` still records
// every module these imports need, so go.sum pins the whole build.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
