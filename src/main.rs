//! stampede: reproduce cache stampedes on a real Redis in front of a real Postgres and measure
//! how well each protection strategy holds. The program is the library's `commands::main`.

fn main() -> std::process::ExitCode {
    stampede::commands::main()
}
