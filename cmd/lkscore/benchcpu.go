package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// daemonCPU is one lkscore process's CPU over a bench run, read from its
// ops listener's /metrics (process_cpu_seconds_total, and the role in
// lkscore_build_info).
type daemonCPU struct {
	OpsURL string  `json:"ops_url"`
	Role   string  `json:"role"`
	CPU    float64 `json:"cpu_seconds"`
	// PerSession is CPU milliseconds per scored session (sessions mode)
	// or per acknowledged webhook (webhooks mode).
	PerSession float64 `json:"cpu_ms_per_session"`
	start      float64
}

// maxMetricsBytes bounds a /metrics answer bench reads.
const maxMetricsBytes = 8 << 20

// readCPU reads a process's CPU seconds and role from its /metrics.
func readCPU(ctx context.Context, client *http.Client, opsURL string) (cpu float64, role string, err error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(opsURL, "/")+"/metrics", nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("--ops-url %s: %w", opsURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, "", fmt.Errorf("--ops-url %s: /metrics answered %s", opsURL, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(io.LimitReader(resp.Body, maxMetricsBytes))
	if err != nil {
		return 0, "", fmt.Errorf("--ops-url %s: /metrics: %w", opsURL, err)
	}
	f, ok := families["process_cpu_seconds_total"]
	if !ok || len(f.GetMetric()) == 0 {
		return 0, "", fmt.Errorf("--ops-url %s: /metrics has no process_cpu_seconds_total (is it lkscore's ops listener?)", opsURL)
	}
	cpu = f.GetMetric()[0].GetCounter().GetValue()
	role = "?"
	if b, ok := families["lkscore_build_info"]; ok && len(b.GetMetric()) > 0 {
		for _, l := range b.GetMetric()[0].GetLabel() {
			if l.GetName() == "role" {
				role = l.GetValue()
			}
		}
	}
	return cpu, role, nil
}

// startCPU reads every ops URL's CPU before a run.
func startCPU(ctx context.Context, client *http.Client, urls []string) ([]daemonCPU, error) {
	out := make([]daemonCPU, 0, len(urls))
	for _, u := range urls {
		cpu, role, err := readCPU(ctx, client, u)
		if err != nil {
			return nil, err
		}
		out = append(out, daemonCPU{OpsURL: u, Role: role, start: cpu})
	}
	return out, nil
}

// finishCPU reads them again after the run: CPU used, per session (or webhook).
func finishCPU(ctx context.Context, client *http.Client, ds []daemonCPU, sessions int) error {
	for i := range ds {
		cpu, _, err := readCPU(ctx, client, ds[i].OpsURL)
		if err != nil {
			return err
		}
		ds[i].CPU = cpu - ds[i].start
		if sessions > 0 {
			ds[i].PerSession = ds[i].CPU * 1000 / float64(sessions)
		}
	}
	return nil
}
