package scoring

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/lkscore/lkscore/session"
)

// DefaultPolicy names the model every agent without a policy of its own
// is scored with (the scoring section itself).
const DefaultPolicy = "default"

// AgentPolicy is one agent's own model (scoring.agents.<name>): the
// scoring section again, with what the agent overrides, plus when it
// applies. The config loader starts each policy from the scoring section,
// so a policy names only what differs (docs/policies.md).
type AgentPolicy struct {
	// Match narrows the policy to some of the agent's sessions: any of
	// the tags, any of the versions. Empty: every session of the agent.
	Match Match `yaml:"match" json:"match"`
	// Config is the agent's whole model. Its Agents and Rules must be
	// empty: rules are written once, for every agent (scoring.rules,
	// narrowed by their when).
	Config `yaml:",inline" json:"config"`
}

// Match selects sessions by what the signals said about them.
type Match struct {
	// Tags match when the session has any of them.
	Tags []string `yaml:"tags" json:"tags,omitempty"`
	// Versions match the agent's version by the one version rule
	// (session.Version): a tag with regression.version_tag's prefix, else
	// the SDK's deployment id, else the version from the job's metadata.
	Versions []string `yaml:"versions" json:"versions,omitempty"`
}

func (m Match) empty() bool { return len(m.Tags) == 0 && len(m.Versions) == 0 }

// matches reports whether a session with these tags and version is in m.
func (m Match) matches(tags []string, version string) bool {
	if len(m.Tags) > 0 && !slices.ContainsFunc(m.Tags, func(t string) bool { return slices.Contains(tags, t) }) {
		return false
	}
	return len(m.Versions) == 0 || slices.Contains(m.Versions, version)
}

// sessionVersion is the agent's version of a session by the one version
// rule (session.Version), with regression.version_tag's prefix (prefix).
func sessionVersion(s Session, prefix string) string {
	if s.Facts == nil {
		return ""
	}
	return session.Version(s.Facts.Tags, s.Facts.DeploymentID, prefix)
}

func sessionTags(s Session) []string {
	if s.Facts == nil {
		return nil
	}
	return s.Facts.Tags
}

// policy is one resolved model: its config, its rules and its name.
type policy struct {
	ref   PolicyRef
	cfg   Config
	match Match
	rules []int // the rules (indices in Config.Rules) whose when can name this policy's agents
}

// validatePolicies checks every agent's policy, naming its key.
func (c Config) validatePolicies() error {
	var errs []error
	names := make([]string, 0, len(c.Agents))
	for name := range c.Agents {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		p := c.Agents[name]
		key := "scoring.agents." + name
		if strings.TrimSpace(name) == "" {
			errs = append(errs, errors.New("scoring.agents: an agent name must not be empty"))
			continue
		}
		if len(p.Agents) > 0 || len(p.Rules) > 0 {
			errs = append(errs, fmt.Errorf("%s: a policy cannot hold agents or rules (write rules once under scoring.rules, with when.agents)", key))
		}
		if err := p.Config.validateModel(); err != nil {
			// The model's messages name keys from "scoring."; a policy's are under its own key.
			errs = append(errs, errors.New(strings.ReplaceAll(err.Error(), "scoring.", key+".")))
		}
	}
	return errors.Join(errs...)
}

// model is the config without its policies and rules: what one policy's
// components are scored with.
func (c Config) model() Config {
	c.Agents, c.Rules = nil, nil
	return c
}

// policyHash hashes what a policy scores with: its model, its match and
// the rules that can apply to it, in config order.
func policyHash(cfg Config, m Match, all []Rule, rules []int) string {
	h := fnv.New32a()
	b, _ := json.Marshal(struct {
		Model Config `json:"model"`
		Match Match  `json:"match"`
		Rules []Rule `json:"rules"`
	}{cfg.model(), m, func() []Rule {
		out := make([]Rule, len(rules))
		for i, r := range rules {
			out[i] = all[r]
		}
		return out
	}()})
	_, _ = h.Write(b)
	return fmt.Sprintf("p%08x", h.Sum32())
}

// resolvePolicies builds the default policy and one per agent, each with
// the rules that can apply to its sessions.
func resolvePolicies(c Config) (def *policy, agents map[string]*policy) {
	forAgent := func(agent string) []int {
		var out []int
		for i, r := range c.Rules {
			if len(r.When.Agents) == 0 || slices.Contains(r.When.Agents, agent) {
				out = append(out, i)
			}
		}
		return out
	}
	// The default policy scores every agent without one, and an agent's
	// sessions its policy does not match: any rule can apply.
	all := make([]int, len(c.Rules))
	for i := range all {
		all[i] = i
	}
	def = &policy{cfg: c.model(), rules: all}
	def.ref = PolicyRef{Name: DefaultPolicy, Hash: policyHash(def.cfg, Match{}, c.Rules, all)}
	agents = make(map[string]*policy, len(c.Agents))
	for name, p := range c.Agents {
		rs := forAgent(name)
		pol := &policy{cfg: p.Config.model(), match: p.Match, rules: rs}
		pol.cfg.VersionTag = c.VersionTag // one version rule, whatever the policy
		pol.ref = PolicyRef{Name: name, Hash: policyHash(pol.cfg, p.Match, c.Rules, rs)}
		agents[name] = pol
	}
	return def, agents
}

// agentVersions are the agents' scoring versions (Scorer.VersionFor): the
// version of the config projected on each agent with a policy or named by
// a rule, and that of the projection on any other agent.
func agentVersions(c Config) (map[string]string, string) {
	named := map[string]bool{}
	for name := range c.Agents {
		named[name] = true
	}
	for _, r := range c.Rules {
		for _, a := range r.When.Agents {
			named[a] = true
		}
	}
	out := make(map[string]string, len(named))
	for a := range named {
		out[a] = c.forAgent(a).Version()
	}
	return out, c.forAgent("").Version()
}

// forAgent is the config as one agent's sessions see it: the scoring
// section, the agent's own policy (none for ""), and the rules whose when
// can name it. With no policies, and rules that all apply to every agent,
// it is c itself (its version is Config.Version).
func (c Config) forAgent(agent string) Config {
	p := c
	if pol, ok := c.Agents[agent]; ok && agent != "" {
		p.Agents = map[string]AgentPolicy{agent: pol}
	} else if len(c.Agents) > 0 {
		p.Agents = nil
	}
	applies := func(r Rule) bool {
		return len(r.When.Agents) == 0 || (agent != "" && slices.Contains(r.When.Agents, agent))
	}
	if !slices.ContainsFunc(c.Rules, func(r Rule) bool { return !applies(r) }) {
		return p // every rule can apply: c's own (nil or empty alike)
	}
	p.Rules = nil
	for _, r := range c.Rules {
		if applies(r) {
			p.Rules = append(p.Rules, r)
		}
	}
	return p
}
