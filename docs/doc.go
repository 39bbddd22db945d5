// Package docs holds no code: its tests check the documentation against the repository.
// Every relative link of a Markdown file resolves (the file, and the heading its #anchor
// names), and docs/architecture.md names every package under cmd/, internal/ and tools/
// and no package that is gone.
package docs
