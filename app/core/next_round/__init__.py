"""The next round: training a new target model from the desk's rounds (inputs, training_data, round_training,
reproduction), comparing it with the current target on held-out splits (held_out, comparison,
comparison_report), the promotion rule and promoting it (promotion_rule, promotion, deferred_int8), and the
model leaderboard of every round's targets (leaderboard, leaderboard_board, leaderboard_report). Qt-free.
The round records themselves (open, close, targets, contexts) are app.core.services.rounds."""
