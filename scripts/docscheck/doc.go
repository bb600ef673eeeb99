// Package docscheck holds the tests that keep the Markdown documentation
// honest: every relative link opens a file that exists (and a line range
// the file has), and no page cites the private write-ups the project
// started from, which its readers do not have.
package docscheck
