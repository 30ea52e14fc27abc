//! `treecast` command-line interface.
fn main() {
    eprintln!("treecast: no subcommands yet");
    std::process::exit(2);
}
