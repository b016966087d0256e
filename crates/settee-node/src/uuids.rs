//! Document id generation with CouchDB's `[uuids] algorithm` choices.

use std::time::{SystemTime, UNIX_EPOCH};

use rand::Rng;

/// Generates 32-hex-digit ids.
pub struct Uuids {
    algorithm: Algorithm,
    prefix: String,
    counter: u64,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Algorithm {
    Random,
    Sequential,
    UtcRandom,
}

fn random_hex(n: usize) -> String {
    let mut rng = rand::thread_rng();
    (0..n)
        .map(|_| char::from_digit(rng.gen_range(0..16), 16).expect("hex digit"))
        .collect()
}

impl Uuids {
    /// A generator for `random`, `sequential` (the default) or `utc_random`.
    pub fn new(algorithm: &str) -> Uuids {
        let algorithm = match algorithm {
            "random" => Algorithm::Random,
            "utc_random" => Algorithm::UtcRandom,
            _ => Algorithm::Sequential,
        };
        Uuids {
            algorithm,
            prefix: random_hex(26),
            counter: rand::thread_rng().gen_range(0..0xfff),
        }
    }

    /// The algorithm's name.
    pub fn name(&self) -> &'static str {
        match self.algorithm {
            Algorithm::Random => "random",
            Algorithm::Sequential => "sequential",
            Algorithm::UtcRandom => "utc_random",
        }
    }

    /// The next id. Sequential ids share a random prefix and increase by small random steps,
    /// so ids created together sort together (good for B+tree locality).
    pub fn next_id(&mut self) -> String {
        match self.algorithm {
            Algorithm::Random => random_hex(32),
            Algorithm::UtcRandom => {
                let micros = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_micros());
                format!("{:014x}{}", micros & 0xff_ffff_ffff_ffff, random_hex(18))
            }
            Algorithm::Sequential => {
                self.counter += rand::thread_rng().gen_range(1..0xffe);
                if self.counter > 0xff_ffff {
                    self.prefix = random_hex(26);
                    self.counter = rand::thread_rng().gen_range(0..0xfff);
                }
                format!("{}{:06x}", self.prefix, self.counter)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_32_hex_digits_and_sequential_ones_increase() {
        for alg in ["random", "sequential", "utc_random"] {
            let mut u = Uuids::new(alg);
            assert_eq!(u.name(), alg);
            let a = u.next_id();
            assert_eq!(a.len(), 32, "{alg}");
            assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        }
        let mut u = Uuids::new("sequential");
        let ids: Vec<String> = (0..1000).map(|_| u.next_id()).collect();
        assert!(ids.windows(2).filter(|w| w[0] < w[1]).count() >= 990);
    }
}
