package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The design is docs/design.md, and the code, the OpenAPI description, the
// migrations and the documents cite it by section. These tests keep the
// citations pointing at sections that exist, and the links between the
// documents pointing at files and headings that exist, so that a reader
// with a clone of courier can follow every one.

// repoRoot is the repository, from this package's directory.
const repoRoot = "../.."

// repoFiles calls f with the path (relative to the repository) and the
// content of every file of the repository but git's own.
func repoFiles(t *testing.T, f func(path string, data []byte)) {
	t.Helper()
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, path)
		if d.IsDir() {
			if d.Name() == ".git" || d.Name() == "courier-data" {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if info, err := d.Info(); err != nil || info.Size() > 4<<20 {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f(filepath.ToSlash(rel), data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// designSections returns the numbers of the sections of docs/design.md.
func designSections(t *testing.T) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "docs", "design.md"))
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^## (\d+)\. `).FindAllStringSubmatch(string(data), -1) {
		sections[m[1]] = true
	}
	if len(sections) < 15 {
		t.Fatalf("docs/design.md has %d numbered sections, want at least the 15 the code cites", len(sections))
	}
	return sections
}

// TestDesignCitationsPointIntoTheRepository checks that nothing cites a
// design outside the repository, and that every "docs/design.md §N" (with
// the further ", §M" of a list), and every "§N" inside the design itself,
// names a section it has.
func TestDesignCitationsPointIntoTheRepository(t *testing.T) {
	sections := designSections(t)
	outside := []byte("DESIGN" + " §") // split, so that this file does not match itself
	citation := regexp.MustCompile(`design\.md\s+§(\d+)((?:,\s*§\d+)*)`)
	bare := regexp.MustCompile(`§(\d+)`)
	cited := 0
	repoFiles(t, func(path string, data []byte) {
		if bytes.Contains(data, outside) {
			t.Errorf("%s cites the design as %q, which a clone of courier does not have: cite docs/design.md §N", path, outside)
		}
		var refs []string
		if path == "docs/design.md" {
			for _, m := range bare.FindAllStringSubmatch(string(data), -1) {
				refs = append(refs, m[1])
			}
		}
		// A citation may run over a comment's line break.
		text := regexp.MustCompile(`\n\s*(//|--|#)?\s*`).ReplaceAllString(string(data), " ")
		for _, m := range citation.FindAllStringSubmatch(text, -1) {
			refs = append(refs, m[1])
			for _, more := range bare.FindAllStringSubmatch(m[2], -1) {
				refs = append(refs, more[1])
			}
		}
		for _, n := range refs {
			cited++
			if !sections[n] {
				t.Errorf("%s cites docs/design.md §%s, which has no such section", path, n)
			}
		}
	})
	if cited < 50 {
		t.Errorf("found %d citations of docs/design.md; the search is broken", cited)
	}
}

// slug is the anchor a heading gets on GitHub: lower case, punctuation
// other than - and _ dropped, spaces as -.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors returns the anchors of a Markdown file's headings.
func anchors(data []byte) map[string]bool {
	out := map[string]bool{}
	fenced := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if !fenced && strings.HasPrefix(line, "#") {
			out[slug(strings.ReplaceAll(strings.TrimLeft(line, "#"), "`", ""))] = true
		}
	}
	return out
}

// TestDocumentLinksResolve checks every relative link of README.md and
// docs/: its file exists and, with #anchor, has a heading of that anchor.
func TestDocumentLinksResolve(t *testing.T) {
	docs := map[string][]byte{}
	repoFiles(t, func(path string, data []byte) {
		if path == "README.md" || strings.HasPrefix(path, "docs/") && strings.HasSuffix(path, ".md") {
			docs[path] = data
		}
	})
	if len(docs) < 5 {
		t.Fatalf("found %d documents; want README.md and docs/", len(docs))
	}
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for path, data := range docs {
		for _, m := range link.FindAllStringSubmatch(string(data), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			dest := path
			if file != "" {
				dest = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(path), file)))
			}
			content, ok := docs[dest]
			if !ok {
				var err error
				if content, err = os.ReadFile(filepath.Join(repoRoot, dest)); err != nil {
					t.Errorf("%s links to %s, which does not exist", path, target)
					continue
				}
			}
			if anchor != "" && !anchors(content)[anchor] {
				t.Errorf("%s links to %s, whose file has no heading with the anchor #%s", path, target, anchor)
			}
		}
	}
}
