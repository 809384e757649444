// Command limits checks the limits the project keeps (docs/development.md,
// "Limits"): no function over 80 lines from `func` to its closing brace,
// no line over 150 characters (both in non-test Go, generated files
// excepted), and no relative link in docs/ or the README that does not
// resolve to a file and, where it names one, a heading. `.ci/run` runs it
// on the repository's tracked files; it prints every violation and exits 1.
//
//	go run ./tools/limits [-root DIR]
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The limits.
const (
	maxFuncLines = 80
	maxLineChars = 150
)

func main() {
	root := flag.String("root", ".", "the repository's root")
	flag.Parse()
	files, err := trackedFiles(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "limits:", err)
		os.Exit(2)
	}
	problems, err := check(*root, files)
	if err != nil {
		fmt.Fprintln(os.Stderr, "limits:", err)
		os.Exit(2)
	}
	for _, p := range problems {
		fmt.Println(p)
	}
	if len(problems) > 0 {
		fmt.Fprintf(os.Stderr, "limits: %d violations\n", len(problems))
		os.Exit(1)
	}
}

// trackedFiles are git's tracked files under root, or every file when root
// is not a git work tree.
func trackedFiles(root string) ([]string, error) {
	out, err := exec.Command("git", "-C", root, "ls-files").Output()
	if err == nil {
		return strings.Fields(string(out)), nil
	}
	var files []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(root, path)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	return files, err
}

// check returns every violation among files (paths relative to root).
func check(root string, files []string) ([]string, error) {
	var problems []string
	for _, f := range files {
		path := filepath.Join(root, f)
		switch {
		case strings.HasSuffix(f, ".go") && !strings.HasSuffix(f, "_test.go"):
			p, err := checkGo(path, f)
			if err != nil {
				return nil, err
			}
			problems = append(problems, p...)
		case strings.HasSuffix(f, ".md") && (f == "README.md" || strings.HasPrefix(f, "docs/")):
			p, err := checkLinks(root, f)
			if err != nil {
				return nil, err
			}
			problems = append(problems, p...)
		}
	}
	return problems, nil
}

// checkGo reports a Go file's long functions and long lines; generated
// files are skipped.
func checkGo(path, name string) ([]string, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, path, src, parser.ParseComments)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", name, err)
	}
	if ast.IsGenerated(file) {
		return nil, nil
	}
	var problems []string
	for _, d := range file.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		start, end := fset.Position(fn.Pos()).Line, fset.Position(fn.End()).Line
		if n := end - start + 1; n > maxFuncLines {
			problems = append(problems, fmt.Sprintf("%s:%d: func %s is %d lines (limit %d)", name, start, funcName(fn), n, maxFuncLines))
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(make([]byte, 0, 64*1024), len(src)+1)
	for n := 1; sc.Scan(); n++ {
		if c := utf8.RuneCount(sc.Bytes()); c > maxLineChars {
			problems = append(problems, fmt.Sprintf("%s:%d: line is %d characters (limit %d)", name, n, c, maxLineChars))
		}
	}
	return problems, sc.Err()
}

func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	t := fn.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if ix, ok := t.(*ast.IndexExpr); ok {
		t = ix.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}

// mdLink is a Markdown inline link's target: [text](target) or
// [text](target "title"); images too.
var mdLink = regexp.MustCompile(`\]\(([^()\s]+)(?:\s+"[^"]*")?\)`)

// checkLinks reports the relative links of a Markdown file that do not
// resolve: a missing file, or a #fragment that names no heading of it.
func checkLinks(root, name string) ([]string, error) {
	src, err := os.ReadFile(filepath.Join(root, name))
	if err != nil {
		return nil, err
	}
	var problems []string
	inFence := false
	for n, line := range strings.Split(string(src), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		for _, m := range mdLink.FindAllStringSubmatch(stripCode(line), -1) {
			if p := checkLink(root, name, m[1]); p != "" {
				problems = append(problems, fmt.Sprintf("%s:%d: link %s: %s", name, n+1, m[1], p))
			}
		}
	}
	return problems, nil
}

// stripCode removes `inline code`, where brackets are not links.
func stripCode(line string) string {
	var b strings.Builder
	in := false
	for _, r := range line {
		if r == '`' {
			in = !in
			continue
		}
		if !in {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// checkLink says what is wrong with one link target of file name, or "".
func checkLink(root, name, target string) string {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return ""
	}
	file, frag, _ := strings.Cut(target, "#")
	path := name
	if file != "" {
		path = filepath.ToSlash(filepath.Join(filepath.Dir(name), file))
		if strings.HasPrefix(path, "../") {
			return "points outside the repository"
		}
		info, err := os.Stat(filepath.Join(root, path))
		if err != nil {
			return "no such file"
		}
		if info.IsDir() {
			return ""
		}
	}
	if frag == "" || !strings.HasSuffix(path, ".md") {
		return ""
	}
	anchors, err := headingAnchors(filepath.Join(root, path))
	if err != nil {
		return err.Error()
	}
	if !anchors[frag] {
		return fmt.Sprintf("no heading #%s in %s", frag, path)
	}
	return ""
}

// headingAnchors are the anchors GitHub gives a Markdown file's headings:
// lower case, punctuation dropped, spaces as hyphens, repeats numbered.
func headingAnchors(path string) (map[string]bool, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	anchors := map[string]bool{}
	count := map[string]int{}
	inFence := false
	for _, line := range strings.Split(string(src), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
		}
		if inFence || !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		a := slug(text)
		if n := count[a]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			anchors[a] = true
		}
		count[a]++
	}
	return anchors, nil
}

// slug is GitHub's heading anchor of text.
func slug(text string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
