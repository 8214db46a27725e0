//! `nums-cloud`: run NumPy-like array jobs on serverless functions. The command line is
//! [`nums_cloud::cli`].

fn main() -> std::process::ExitCode {
    nums_cloud::cli::main()
}
