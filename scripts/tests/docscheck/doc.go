// Package docscheck holds the tests that keep the Markdown documentation
// honest and short:
//
//   - every relative link opens a file that exists, a #Lx-Ly range the file
//     has, and a #heading the page has (TestRelativeLinksResolve);
//   - a #Lx-Ly link into Go code names the declaration it shows, in
//     backticks, and starts on it, so a link that slid onto other code
//     fails; a Go or SQL excerpt under a line link is those lines
//     (TestGoLineLinksNameTheirDeclaration);
//   - the README, each incident page and docs/ as a whole keep within their
//     word budgets (TestWordBudgets);
//   - every incident page has the one shape: what happened in three
//     sentences, the lab's picture, the two codes linked side by side, how
//     to run it, one exercise with its answer folded
//     (TestIncidentPagesHaveOneShape);
//   - no page cites the private write-ups the project started from, which
//     its readers do not have (TestNoPageCitesTheSourceWriteUps).
//
// Each check is shown failing on a small fixture of its own.
package docscheck
