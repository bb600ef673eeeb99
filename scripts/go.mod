module github.com/oncemall/oncemall/scripts

go 1.26.0

replace github.com/oncemall/oncemall/pkg => ../pkg
