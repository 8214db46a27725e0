//! NumPy names nums-cloud does not have, each with what to write instead: the "is not
//! supported" error of a call and docs/unsupported.md (a test keeps the page in step).

/// (NumPy's name, what to write instead: Markdown, one line).
pub(super) const UNSUPPORTED: &[(&str, &str)] = &[
    (
        "apply_along_axis",
        "no Python functions run in a job; write the function as an expression of arrays",
    ),
    (
        "vectorize",
        "no Python functions run in a job; write the function as an expression of arrays",
    ),
];

/// What to write instead of NumPy's `name`, if it is a name of the table.
pub(super) fn instead(name: &str) -> Option<&'static str> {
    UNSUPPORTED
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, i)| *i)
}
