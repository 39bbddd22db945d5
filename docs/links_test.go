package docs_test

import (
	"bufio"
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// repoRoot is the repository's root: this file's directory's parent.
func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller information")
	}
	return filepath.Dir(filepath.Dir(file))
}

// markdownFiles lists every Markdown file of the repository, as slash paths from its
// root, but those under a dot directory (.git, .junban), node_modules and bin.
func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ".md") {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// link is a relative link of a Markdown file: its target as written, and its line.
type link struct {
	line   int
	target string
}

// markdown is what the link check needs of a Markdown file: its relative links and the
// anchors of its headings.
type markdown struct {
	links   []link
	anchors map[string]bool
}

var (
	fence    = regexp.MustCompile("^ {0,3}(```|~~~)")
	codeSpan = regexp.MustCompile("`+[^`]*`+")
	// inlineLink matches [text](target) and ![alt](target), with an optional title.
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	heading    = regexp.MustCompile(`^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	scheme     = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// parseMarkdown reads the links and headings of a Markdown file outside fenced blocks and
// code spans, where a "# comment" is no heading and "[x](y)" no link.
func parseMarkdown(t *testing.T, file string) markdown {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	md := markdown{anchors: map[string]bool{}}
	seen := map[string]int{}
	var inFence string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if m := fence.FindStringSubmatch(line); m != nil {
			switch {
			case inFence == "":
				inFence = m[1]
			case m[1] == inFence:
				inFence = ""
			}
			continue
		}
		if inFence != "" {
			continue
		}
		if m := heading.FindStringSubmatch(line); m != nil {
			a := anchor(m[2])
			if k := seen[a]; k > 0 {
				md.anchors[fmt.Sprintf("%s-%d", a, k)] = true
			} else {
				md.anchors[a] = true
			}
			seen[a]++
		}
		for _, m := range inlineLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
			if target := m[1]; target != "" && !scheme.MatchString(target) {
				md.links = append(md.links, link{line: n, target: target})
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return md
}

// anchor is the anchor a heading gets on the repository's host: the text of its links,
// lower case, letters, digits, '-' and '_' kept, spaces as '-', anything else dropped.
func anchor(h string) string {
	h = inlineLink.ReplaceAllStringFunc(h, func(l string) string {
		return strings.TrimPrefix(l[:strings.Index(l, "](")], "!")
	})
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// Every relative link of every Markdown file resolves: the file or directory it names
// exists inside the repository, and an #anchor names a heading of its Markdown file.
// (Fails with README.md's link to docs/configuration.md spelled docs/config.md, with
// docs/architecture.md's link to lockhandoff.md#detached-turns spelled #detached-turn, and
// with a link to ../../outside.md; tried.)
func TestRelativeLinksResolve(t *testing.T) {
	root := repoRoot(t)
	files := markdownFiles(t, root)
	for _, must := range []string{"README.md", "docs/architecture.md"} {
		if !slices.Contains(files, must) {
			t.Fatalf("%s not found among %v", must, files)
		}
	}
	docs := map[string]markdown{}
	parsed := func(rel string) markdown {
		md, ok := docs[rel]
		if !ok {
			md = parseMarkdown(t, filepath.Join(root, filepath.FromSlash(rel)))
			docs[rel] = md
		}
		return md
	}
	var checked int
	for _, rel := range files {
		for _, l := range parsed(rel).links {
			checked++
			if problem := resolve(root, rel, l.target, parsed); problem != "" {
				t.Errorf("%s:%d: link %q: %s", rel, l.line, l.target, problem)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative link found: the parser is broken")
	}
}

// resolve says what is wrong with a link of from (a slash path from root) to target, or "".
func resolve(root, from, target string, parsed func(string) markdown) string {
	p, frag, _ := strings.Cut(target, "#")
	p, err := url.PathUnescape(p)
	if err != nil {
		return err.Error()
	}
	to := from
	if p != "" {
		if strings.HasPrefix(p, "/") {
			return "absolute path: write it relative to " + path.Dir(from)
		}
		to = path.Clean(path.Join(path.Dir(from), p))
		if to == ".." || strings.HasPrefix(to, "../") {
			return "outside the repository"
		}
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(to))); err != nil {
			return "no such file or directory " + to
		}
	}
	if frag == "" || !strings.HasSuffix(to, ".md") {
		return ""
	}
	if !parsed(to).anchors[frag] {
		return fmt.Sprintf("%s has no heading whose anchor is #%s", to, frag)
	}
	return ""
}
