//! Fig. 4 of [Kaishima2005] as a table: E[max] over n receivers for the two matched pairs of
//! Table 1 (same mean and variance under both models), n = 2 .. 4096.
//!
//! Run: `cargo run --release --example fig4_table`
//!
//! Pareto E[max] is the closed form (log-gamma); normal E[max] is numerical integration. The
//! claim of [Kaishima2005]: beyond a small n the Pareto estimate exceeds the normal one, and the gap grows
//! with n (Pareto grows like n^(1/alpha), normal like sqrt(2 ln n)).

use treecast::estimate::{normal_expected_max_iid, pareto};

fn main() {
    // (normal mu, sigma) <-> (Pareto k, alpha), milliseconds (AMP round-trip times).
    let pairs: [((f64, f64), (f64, f64)); 2] = [((44.3, 2.8), (41.7, 16.9)), ((42.5, 1.59), (41.0, 27.7))];
    for ((mu, sigma), (k, alpha)) in pairs {
        let p_mean = alpha * k / (alpha - 1.0);
        let p_sd = k * (alpha / ((alpha - 1.0).powi(2) * (alpha - 2.0))).sqrt();
        println!(
            "normal(mu {mu}, sigma {sigma})  vs  Pareto(k {k}, alpha {alpha})  [Pareto mean {p_mean:.2}, sd {p_sd:.2}]"
        );
        println!(
            "{:>6} {:>12} {:>12} {:>10} {:>8}",
            "n", "normal", "Pareto", "gap", "gap %"
        );
        let mut n = 2u32;
        while n <= 4096 {
            let e_n = normal_expected_max_iid(mu, sigma, n as f64).expect("valid normal");
            let e_p = pareto::expected_max_iid(k, alpha, n as f64);
            println!(
                "{n:>6} {e_n:>12.3} {e_p:>12.3} {:>10.3} {:>7.2}%",
                e_p - e_n,
                100.0 * (e_p / e_n - 1.0)
            );
            n *= 2;
        }
        println!();
    }
}
