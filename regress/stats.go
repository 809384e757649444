package regress

import (
	"cmp"
	"math"
	"slices"
	"sort"
)

// mannWhitney returns the one-sided p-value of the Mann–Whitney U test that
// y (current) lies above x (baseline) when worse is +1, below it when worse
// is −1: the normal approximation with the tie correction and a continuity
// correction (docs/regression.md). It assumes nothing about the shape of
// either distribution, so skewed latencies are fine.
func mannWhitney(x, y []float64, worse float64) float64 {
	n1, n2 := float64(len(x)), float64(len(y))
	if n1 == 0 || n2 == 0 {
		return 1
	}
	type obs struct {
		v     float64
		fromY bool
	}
	all := make([]obs, 0, len(x)+len(y))
	for _, v := range x {
		all = append(all, obs{v, false})
	}
	for _, v := range y {
		all = append(all, obs{v, true})
	}
	// Equal values share their average rank, so their order does not matter.
	slices.SortFunc(all, func(a, b obs) int { return cmp.Compare(a.v, b.v) })
	var r2, ties float64
	for i := 0; i < len(all); {
		j := i
		for j < len(all) && all[j].v == all[i].v {
			j++
		}
		rank := float64(i+j+1) / 2 // average of ranks i+1 … j
		for k := i; k < j; k++ {
			if all[k].fromY {
				r2 += rank
			}
		}
		t := float64(j - i)
		ties += t*t*t - t
		i = j
	}
	n := n1 + n2
	u := r2 - n2*(n2+1)/2
	variance := n1 * n2 / 12 * ((n + 1) - ties/(n*(n-1)))
	if variance <= 0 {
		return 1 // every value equal
	}
	z := (worse*(u-n1*n2/2) - 0.5) / math.Sqrt(variance)
	return upperTail(z)
}

// upperTail is P(Z ≥ z) for a standard normal Z.
func upperTail(z float64) float64 { return math.Erfc(z/math.Sqrt2) / 2 }

// twoProportions returns the one-sided p-value of the pooled two-proportion
// z-test that k2/n2 (current) is above k1/n1 (baseline) when worse is +1,
// below it when worse is −1.
func twoProportions(k1, n1, k2, n2 int, worse float64) float64 {
	if n1 == 0 || n2 == 0 {
		return 1
	}
	p := float64(k1+k2) / float64(n1+n2)
	se := math.Sqrt(p * (1 - p) * (1/float64(n1) + 1/float64(n2)))
	if se == 0 {
		return 1
	}
	return upperTail(worse * (float64(k2)/float64(n2) - float64(k1)/float64(n1)) / se)
}

// binomialTail returns P(X ≥ k) for X ~ Binomial(n, p).
func binomialTail(k, n int, p float64) float64 {
	if k <= 0 {
		return 1
	}
	if p <= 0 {
		return 0
	}
	if p >= 1 {
		return 1
	}
	sum := 0.0
	for i := k; i <= n; i++ {
		lg := lgamma(n+1) - lgamma(i+1) - lgamma(n-i+1)
		sum += math.Exp(lg + float64(i)*math.Log(p) + float64(n-i)*math.Log1p(-p))
	}
	return math.Min(sum, 1)
}

func lgamma(n int) float64 {
	v, _ := math.Lgamma(float64(n))
	return v
}

// benjaminiHochberg returns the BH-adjusted p-values (q-values), in the
// input's order: a metric is significant at false discovery rate α when its
// q-value is at most α.
func benjaminiHochberg(p []float64) []float64 {
	m := len(p)
	idx := make([]int, m)
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return p[idx[a]] < p[idx[b]] })
	q := make([]float64, m)
	prev := 1.0
	for r := m - 1; r >= 0; r-- {
		v := math.Min(prev, p[idx[r]]*float64(m)/float64(r+1))
		q[idx[r]] = v
		prev = v
	}
	return q
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	sum := 0.0
	for _, x := range v {
		sum += x
	}
	return sum / float64(len(v))
}

func stddev(v []float64) float64 {
	if len(v) < 2 {
		return 0
	}
	m, ss := mean(v), 0.0
	for _, x := range v {
		ss += (x - m) * (x - m)
	}
	return math.Sqrt(ss / float64(len(v)-1))
}

func round(v float64, places int) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	f := math.Pow(10, float64(places))
	return math.Round(v*f) / f
}
