use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use super::{Relay, Turn};

const SWITCH: Duration = Duration::from_millis(20);

/// What the Python binding does with a turn: reach, then depose on the same thread.
fn lead(relay: &Relay) -> bool {
    let mut back = true;
    loop {
        match relay.wait_turn(back) {
            Turn::Lead => return true,
            Turn::Stopped => return false,
            Turn::Reach(event) => {
                if relay.depose(event) {
                    return true;
                }
                back = false;
            }
        }
    }
}

/// A thread that waits for the lead; once it leads, it starts serving an event
/// that lasts `hold`. Sends whether it led, and when.
fn follower(relay: &Arc<Relay>, hold: Duration) -> mpsc::Receiver<(bool, Instant)> {
    let (tx, rx) = mpsc::channel();
    let relay = Arc::clone(relay);
    thread::spawn(move || {
        let led = lead(&relay);
        if led {
            relay.serve();
        }
        let _ = tx.send((led, Instant::now()));
        thread::sleep(hold);
    });
    rx
}

fn quiet(rx: &mpsc::Receiver<(bool, Instant)>, wait: Duration) -> bool {
    rx.recv_timeout(wait).is_err()
}

#[test]
fn the_first_thread_leads_and_the_others_wait_while_it_polls() {
    let relay = Arc::new(Relay::new(SWITCH));
    assert_eq!(relay.wait_turn(false), Turn::Lead);
    assert_eq!(
        relay.wait_turn(false),
        Turn::Lead,
        "a leader calling again still leads"
    );
    let rx = follower(&relay, Duration::ZERO);
    assert!(
        quiet(&rx, SWITCH * 4),
        "nothing is served: the leader keeps the lead"
    );
    relay.stop();
    assert!(!rx.recv().unwrap().0);
}

#[test]
fn a_fast_event_keeps_the_lead() {
    let relay = Arc::new(Relay::new(Duration::from_secs(2)));
    assert_eq!(relay.wait_turn(false), Turn::Lead);
    let rx = follower(&relay, Duration::ZERO);
    for _ in 0..20 {
        relay.serve();
        thread::sleep(Duration::from_millis(2));
        assert!(relay.keep_lead());
    }
    assert!(quiet(&rx, Duration::ZERO));
    relay.stop();
}

#[test]
fn a_slow_event_hands_the_lead_to_the_watcher_after_switch_after() {
    let relay = Arc::new(Relay::new(SWITCH));
    assert_eq!(relay.wait_turn(false), Turn::Lead);
    relay.idle();
    let rx = follower(&relay, Duration::ZERO);
    thread::sleep(SWITCH); // the follower waits, untimed, on the blocked leader
    let began = Instant::now();
    relay.serve();
    let (led, at) = rx
        .recv_timeout(SWITCH * 20)
        .expect("the watcher takes over");
    assert!(led);
    assert!(at - began >= SWITCH, "not before switch_after");
    assert!(!relay.keep_lead(), "the old leader learns it lost the lead");
    relay.stop();
}

#[test]
fn a_leader_that_moved_on_is_not_deposed() {
    let relay = Arc::new(Relay::new(SWITCH));
    assert_eq!(relay.wait_turn(false), Turn::Lead);
    relay.serve();
    let (reached, at_reach) = mpsc::channel();
    let (go_on, on_go) = mpsc::channel::<()>();
    let watcher = {
        let relay = Arc::clone(&relay);
        thread::spawn(move || {
            let Turn::Reach(event) = relay.wait_turn(false) else {
                panic!()
            };
            reached.send(()).unwrap();
            on_go.recv().unwrap();
            relay.depose(event)
        })
    };
    at_reach.recv_timeout(SWITCH * 20).unwrap();
    assert!(relay.keep_lead());
    relay.serve(); // the next event: the one reached for is done
    go_on.send(()).unwrap();
    assert!(!watcher.join().unwrap());
    assert!(relay.keep_lead());
    relay.stop();
}

#[test]
fn one_watcher_at_a_time_then_the_next_follower_watches_the_new_leader() {
    const SWITCH: Duration = Duration::from_millis(100);
    let relay = Arc::new(Relay::new(SWITCH));
    assert_eq!(relay.wait_turn(false), Turn::Lead);
    let first = follower(&relay, SWITCH * 40);
    let second = follower(&relay, Duration::ZERO);
    thread::sleep(SWITCH);
    relay.serve();
    // One of the two takes over; it then serves a slow event itself...
    let (winner, loser) = loop {
        if let Ok((led, _)) = first.try_recv() {
            break (led, &second);
        }
        if let Ok((led, _)) = second.try_recv() {
            break (led, &first);
        }
        thread::sleep(Duration::from_millis(1));
    };
    assert!(winner);
    assert!(quiet(loser, SWITCH / 4), "only the watcher reached");
    // ...so the other becomes the watcher and takes over in turn.
    assert!(loser.recv_timeout(SWITCH * 20).unwrap().0);
    relay.stop();
}

#[test]
fn stop_releases_every_waiting_thread() {
    let relay = Arc::new(Relay::new(SWITCH));
    assert_eq!(relay.wait_turn(false), Turn::Lead);
    let waiting: Vec<_> = (0..3).map(|_| follower(&relay, Duration::ZERO)).collect();
    thread::sleep(SWITCH);
    relay.stop();
    for rx in waiting {
        assert!(!rx.recv_timeout(SWITCH * 20).unwrap().0);
    }
    assert_eq!(relay.wait_turn(false), Turn::Stopped);
}

/// Leads from a new thread and serves: the returned handle's thread then waits
/// for `go`, finishes its event and comes back (`wait_turn(true)`).
fn leader_that_comes_back(
    relay: &Arc<Relay>,
) -> (
    mpsc::Receiver<()>,
    mpsc::Sender<()>,
    thread::JoinHandle<Turn>,
) {
    let (serving, on_serving) = mpsc::channel();
    let (go, on_go) = mpsc::channel::<()>();
    let relay = Arc::clone(relay);
    let handle = thread::spawn(move || {
        assert!(lead(&relay));
        relay.serve();
        serving.send(()).unwrap();
        on_go.recv().unwrap();
        assert!(!relay.keep_lead(), "lost the lead meanwhile");
        relay.wait_turn(true)
    });
    (on_serving, go, handle)
}

#[test]
fn a_thread_back_from_a_slow_request_takes_the_lead_at_once_and_one_back_from_a_fast_one_waits() {
    const SWITCH: Duration = Duration::from_millis(200);
    let relay = Arc::new(Relay::new(SWITCH));
    assert_eq!(relay.wait_turn(false), Turn::Lead);
    relay.serve(); // a slow event: the other thread takes over after SWITCH
    let (other_serving, other_go, other) = leader_that_comes_back(&relay);
    other_serving.recv().unwrap();
    assert!(!relay.keep_lead());
    // Back from a slow event while the leader serves: the lead at once, not a reach.
    assert_eq!(relay.wait_turn(true), Turn::Lead);
    relay.serve();
    // The other thread lost the lead during a fast event: coming back, it waits.
    other_go.send(()).unwrap();
    thread::sleep(SWITCH / 4);
    assert!(!other.is_finished());
    relay.stop();
    assert_eq!(other.join().unwrap(), Turn::Stopped);
}
