// Package test validates the deployment artifacts without a cluster: the
// Helm chart (rendered, linted, strictly decoded, checked against what the
// binary serves) and the image (the Dockerfile's static build). It is a
// module of its own so the Kubernetes client libraries stay out of
// lkscore's go.mod.
package test
