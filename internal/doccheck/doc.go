// Package doccheck holds the README and docs/ to what they claim: its tests
// read the markdown and the repository (no cluster) and fail on a dead
// relative link or #anchor, a repository path or test name cited in
// backticks that does not exist, a README or docs section cited from code
// or manifests that does not exist, a benchmark row whose commit is not in
// the history, and supported Kubernetes versions other than those
// hack/test.sh runs. The README's walkthrough itself is run by
// e2e/walkthrough.
package doccheck
