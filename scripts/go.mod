module github.com/oncemall/oncemall/scripts

go 1.26.0

require github.com/oncemall/oncemall/pkg v0.0.0

replace github.com/oncemall/oncemall/pkg => ../pkg
