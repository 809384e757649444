package config

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/lkscore/lkscore/internal/typo"
)

// explainYAML rewrites yaml.v3's decoding errors ("line 2: cannot unmarshal
// !!int `20` into time.Duration", "line 3: field embeded_port not found in
// type config.NATS") so that each names its key, with a hint: the unit a
// duration needs, or the known key an unknown one is closest to.
func explainYAML(b []byte, err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	var root yaml.Node
	if yaml.Unmarshal(b, &root) != nil {
		return err
	}
	out := make([]string, 0, len(te.Errors))
	for _, msg := range te.Errors {
		out = append(out, explainLine(&root, msg))
	}
	return errors.New(strings.Join(out, "; "))
}

var (
	lineRe     = regexp.MustCompile(`^line (\d+): (.*)$`)
	notFoundRe = regexp.MustCompile("^field (\\S+) not found in type ")
	typeRe     = regexp.MustCompile("^cannot unmarshal !!(\\w+) `(.*)` into (\\S+)$")
)

func explainLine(root *yaml.Node, msg string) string {
	m := lineRe.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	line, _ := strconv.Atoi(m[1])
	nf := notFoundRe.FindStringSubmatch(m[2])
	name := ""
	if nf != nil {
		name = nf[1]
	}
	path := keyPathAt(root, line, name)
	if path == nil {
		return msg
	}
	key := strings.Join(path, ".")
	if nf != nil {
		hint := ""
		if best := closest(nf[1], keysAt(reflect.TypeOf(Config{}), path[:len(path)-1])); best != "" {
			hint = fmt.Sprintf("; did you mean %s?", strings.Join(append(append([]string(nil), path[:len(path)-1]...), best), "."))
		}
		return fmt.Sprintf("%s (line %d): no such setting%s", key, line, hint)
	}
	if tm := typeRe.FindStringSubmatch(m[2]); tm != nil {
		switch tm[3] {
		case "time.Duration":
			return fmt.Sprintf("%s (line %d): %q is not a duration; write it with a unit, e.g. %ss, 500ms or 2m", key, line, tm[2], digitsOr(tm[2], "20"))
		case "int", "int64", "uint64", "float64", "bool":
			return fmt.Sprintf("%s (line %d): %q is not a %s", key, line, tm[2], map[string]string{"int": "whole number",
				"int64": "whole number", "uint64": "whole number", "float64": "number", "bool": "boolean (true or false)"}[tm[3]])
		}
		return fmt.Sprintf("%s (line %d): %s", key, line, m[2])
	}
	return fmt.Sprintf("%s (line %d): %s", key, line, m[2])
}

func digitsOr(s, def string) string {
	if _, err := strconv.Atoi(s); err == nil {
		return s
	}
	return def
}

// keyPathAt returns the path of the mapping key on line, or nil: the
// deepest one (a flow mapping puts a key and its value's keys on one
// line), and of several, the one called name when one is.
func keyPathAt(n *yaml.Node, line int, name string) []string {
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for _, c := range n.Content {
			if p := keyPathAt(c, line, name); p != nil {
				return p
			}
		}
	case yaml.MappingNode:
		var first []string
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if p := keyPathAt(v, line, name); p != nil {
				return append([]string{k.Value}, p...)
			}
			if k.Line == line && (name == "" || k.Value == name) {
				return []string{k.Value}
			}
			if k.Line == line && first == nil {
				first = []string{k.Value}
			}
		}
		return first
	}
	return nil
}

// keysAt returns the YAML keys of the struct that path leads to in t (a
// map's key in the path, e.g. an agent's name, leads to its value).
func keysAt(t reflect.Type, path []string) []string {
	for _, p := range path {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
			t = t.Elem()
		}
		if t.Kind() == reflect.Map {
			t = t.Elem()
			continue
		}
		if t.Kind() != reflect.Struct {
			return nil
		}
		f, ok := fieldByYAML(t, p)
		if !ok {
			return nil
		}
		t = f.Type
	}
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	return structKeys(t)
}

// structKeys lists a struct's YAML keys, its inline fields' included.
func structKeys(t reflect.Type) []string {
	var keys []string
	for i := range t.NumField() {
		if f := t.Field(i); isInline(f) {
			keys = append(keys, structKeys(f.Type)...)
		} else if name := yamlName(f); name != "" {
			keys = append(keys, name)
		}
	}
	return keys
}

func isInline(f reflect.StructField) bool {
	_, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	return f.Type.Kind() == reflect.Struct && strings.Contains(opts, "inline")
}

func fieldByYAML(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if isInline(f) {
			if g, ok := fieldByYAML(f.Type, name); ok {
				return g, true
			}
			continue
		}
		if yamlName(f) == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func yamlName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if tag == "-" {
		return ""
	}
	if tag == "" {
		return strings.ToLower(f.Name)
	}
	return tag
}

// closest returns the candidate nearest to s by edit distance, if it is
// near enough to be a typo (at most a third of its length, at least 1).
func closest(s string, candidates []string) string {
	return typo.Closest(s, candidates, max(1, len(s)/3))
}
